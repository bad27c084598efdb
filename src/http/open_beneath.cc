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

} // namespace lepus
