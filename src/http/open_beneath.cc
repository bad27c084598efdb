#include "http/open_beneath.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <string>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace lepus {
namespace {

// Fallback for kernels without openat2: one openat per component with
// O_NOFOLLOW. ".." is refused (EXDEV); a symlink anywhere is refused (ELOOP) —
// simpler and stricter than resolving it and checking where it lands.
UniqueFd open_by_walk(int dir_fd, const char* rel_path, int flags) {
    std::string path(rel_path);
    UniqueFd current;
    int at = dir_fd;
    size_t pos = 0;
    while (true) {
        size_t slash = path.find('/', pos);
        bool last = slash == std::string::npos;
        std::string component = path.substr(pos, last ? std::string::npos : slash - pos);
        pos = last ? path.size() : slash + 1;
        if (component.empty() || component == ".") {
            if (!last) continue;
            component.assign(1, '.');
        }
        if (component == "..") {
            errno = EXDEV;
            return {};
        }
        int component_flags = last ? (flags | O_NOFOLLOW) : (O_PATH | O_DIRECTORY | O_NOFOLLOW);
        int fd = openat(at, component.c_str(), component_flags | O_CLOEXEC);
        if (fd < 0) {
            // O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR; report a
            // symlink as ELOOP like the last component does.
            int saved = errno;
            struct stat st;
            if (saved == ENOTDIR && fstatat(at, component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                saved = ELOOP;
            errno = saved;
            return {};
        }
        current.reset(fd);
        at = fd;
        if (last) return current;
    }
}

} // namespace

UniqueFd open_beneath(int dir_fd, const char* rel_path, int flags, ConfineMode mode) {
    if (mode == ConfineMode::Auto) {
        // The kernel answer is cached: once ENOSYS, always ENOSYS.
        static std::atomic<bool> have_openat2{true};
        if (have_openat2.load(std::memory_order_relaxed)) {
            open_how how;
            memset(&how, 0, sizeof how);
            how.flags = uint64_t(flags | O_CLOEXEC);
            how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
            long fd = -1;
            // RESOLVE_BENEATH fails with EAGAIN when a concurrent rename races the
            // lookup (openat2(2)); retry a few times, not forever (a lease can
            // also give EAGAIN).
            for (int attempt = 0; attempt < 4; ++attempt) {
                fd = syscall(SYS_openat2, dir_fd, rel_path, &how, sizeof how);
                if (fd >= 0 || (errno != EAGAIN && errno != EINTR)) break;
            }
            if (fd >= 0 || errno != ENOSYS) return UniqueFd(int(fd));
            have_openat2.store(false, std::memory_order_relaxed);
        }
    }
    return open_by_walk(dir_fd, rel_path, flags);
}

std::optional<SymlinkPolicy> parse_symlink_policy(std::string_view text) {
    if (text == "beneath") return SymlinkPolicy::Beneath;
    if (text == "follow") return SymlinkPolicy::Follow;
    if (text == "owner") return SymlinkPolicy::Owner;
    return std::nullopt;
}

std::string_view symlink_policy_name(SymlinkPolicy policy) {
    switch (policy) {
    case SymlinkPolicy::Follow:
        return "follow";
    case SymlinkPolicy::Owner:
        return "owner";
    case SymlinkPolicy::Beneath:
        break;
    }
    return "beneath";
}

namespace {

UniqueFd open_following(int dir_fd, const char* rel_path, int flags) {
    open_how how;
    memset(&how, 0, sizeof how);
    how.flags = uint64_t(flags | O_CLOEXEC);
    how.resolve = RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, dir_fd, rel_path, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) fd = openat(dir_fd, rel_path, flags | O_CLOEXEC);
    return UniqueFd(int(fd));
}

// --symlinks owner: a walk, one component at a time, with O_NOFOLLOW. A link
// is read through the descriptor of the link itself (its owner and its text
// from the same inode), its text resolved by the same walk, and the owner of
// the descriptor that resolution opened compared with the link's: what is
// checked is what is served, however the links change meanwhile (issue 32: a
// check by path after an open by path let a flipped link serve root's file).
// A link on /proc is refused: its text does not say what it opens.
class OwnerWalk {
public:
    // Opens `path` from `at` (relative; absolute when it starts with '/'),
    // the last component with `flags`, every link on the way checked.
    UniqueFd open(int at, std::string_view path, int flags) {
        UniqueFd current; // the directory reached so far; `at` until the first one
        if (path.starts_with('/')) {
            current.reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
            if (!current) return {};
            at = current.get();
        }
        // A trailing '/' (or "x/.") asks for a directory, as the kernel's lookup.
        size_t pos = 0;
        while (true) {
            size_t slash = path.find('/', pos);
            bool last = slash == std::string_view::npos;
            std::string name(path.substr(pos, last ? std::string_view::npos : slash - pos));
            pos = last ? path.size() : slash + 1;
            bool final = last || path.find_first_not_of('/', pos) == std::string_view::npos;
            if (name.empty() || name == ".") {
                if (!final) continue;
                name.assign(1, '.');
            }
            bool want_directory = final && !last;
            UniqueFd next = step(at, name, final ? flags : O_PATH, want_directory || !final);
            if (!next) return {};
            if (final) return next;
            current = std::move(next);
            at = current.get();
        }
    }

private:
    static constexpr int kMaxLinks = 40; // the kernel's MAXSYMLINKS

    // One component `name` of the directory `at`: opened, or the link it is
    // resolved and checked. `directory`: it must be a directory.
    UniqueFd step(int at, const std::string& name, int flags, bool directory) {
        int open_flags = flags | O_NOFOLLOW | O_CLOEXEC | (directory ? O_DIRECTORY : 0);
        UniqueFd fd(openat(at, name.c_str(), open_flags));
        struct stat st;
        if (fd) {
            if ((flags & O_PATH) == 0) return fd; // O_NOFOLLOW opened no link
            if (fstat(fd.get(), &st) != 0) return {};
            if (!S_ISLNK(st.st_mode)) return fd;
        } else if (errno != ELOOP && errno != ENOTDIR && errno != EMLINK) {
            return {};
        }
        // A link (or not a directory, which the link's own stat tells).
        UniqueFd link(openat(at, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        if (!link || fstat(link.get(), &st) != 0) return {};
        if (!S_ISLNK(st.st_mode)) {
            errno = directory ? ENOTDIR : ELOOP;
            return {};
        }
        struct statfs fs;
        if (fstatfs(link.get(), &fs) != 0 || fs.f_type == PROC_SUPER_MAGIC ||
            ++links_ > kMaxLinks) {
            errno = ELOOP;
            return {};
        }
        std::string target(PATH_MAX, '\0'); // not on the stack: links nest 40 deep
        ssize_t length = readlinkat(link.get(), "", target.data(), target.size());
        if (length <= 0 || size_t(length) >= target.size()) {
            if (length >= 0) errno = ENAMETOOLONG;
            return {};
        }
        // The link's target, opened as the component would have been.
        target.resize(size_t(length));
        if (directory && !target.ends_with('/')) target.push_back('/');
        UniqueFd resolved = open(at, target, flags);
        struct stat target_st;
        if (!resolved || fstat(resolved.get(), &target_st) != 0) return {};
        if (target_st.st_uid != st.st_uid) {
            errno = ELOOP;
            return {};
        }
        return resolved;
    }

    int links_ = 0;
};

} // namespace

UniqueFd open_confined(int dir_fd, const char* rel_path, int flags, SymlinkPolicy policy) {
    switch (policy) {
    case SymlinkPolicy::Follow:
        return open_following(dir_fd, rel_path, flags);
    case SymlinkPolicy::Owner:
        return OwnerWalk().open(dir_fd, rel_path, flags);
    case SymlinkPolicy::Beneath:
        break;
    }
    return open_beneath(dir_fd, rel_path, flags);
}

} // namespace lepus
