#include "http/open_beneath.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string>
#include <sys/stat.h>
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

// Every symlink on the way (each prefix of rel_path) must have the owner of
// what it points to: a user's link to their own files is followed, a link to
// root's /etc/shadow planted in an upload folder is not.
bool symlink_owners_match(int dir_fd, const char* rel_path) {
    std::string path(rel_path);
    for (size_t end = 0; end != std::string::npos;) {
        end = path.find('/', end + 1);
        std::string prefix = path.substr(0, end);
        if (prefix.empty() || prefix == ".") continue;
        struct stat link, target;
        if (fstatat(dir_fd, prefix.c_str(), &link, AT_SYMLINK_NOFOLLOW) != 0) return false;
        if (!S_ISLNK(link.st_mode)) continue;
        if (fstatat(dir_fd, prefix.c_str(), &target, 0) != 0) return false;
        if (link.st_uid != target.st_uid) return false;
    }
    return true;
}

} // namespace

UniqueFd open_confined(int dir_fd, const char* rel_path, int flags, SymlinkPolicy policy) {
    if (policy == SymlinkPolicy::Beneath) return open_beneath(dir_fd, rel_path, flags);
    UniqueFd fd = open_following(dir_fd, rel_path, flags);
    if (fd && policy == SymlinkPolicy::Owner && !symlink_owners_match(dir_fd, rel_path)) {
        errno = ELOOP;
        return {};
    }
    return fd;
}

} // namespace lepus
