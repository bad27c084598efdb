// Opening a path confined to a directory: nothing — no "..", no absolute or
// relative symlink, no /proc magic link — can resolve outside of it.
#pragma once

#include "base/unique_fd.h"

namespace lepus {

enum class ConfineMode {
    Auto, // openat2(RESOLVE_BENEATH), or the walk when the kernel lacks openat2 (< 5.6)
    Walk, // always the component walk (tests use it to exercise the fallback)
};

// Opens `rel_path` (relative, no leading '/'; "." for the directory itself)
// beneath `dir_fd` with `flags` (O_CLOEXEC is added). On failure returns an empty
// fd and sets errno: EXDEV for an escape attempt (openat2), ELOOP for a symlink
// met by the walk, which refuses every symlink rather than resolving it.
UniqueFd open_beneath(int dir_fd, const char* rel_path, int flags,
                      ConfineMode mode = ConfineMode::Auto);

} // namespace lepus
