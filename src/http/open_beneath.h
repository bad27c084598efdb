// Opening a path confined to a directory: nothing — no "..", no absolute or
// relative symlink, no /proc magic link — can resolve outside of it.
#pragma once

#include "base/unique_fd.h"

#include <cstdint>
#include <optional>
#include <string_view>

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

// --symlinks: what a symbolic link under the root may do (issue 18).
enum class SymlinkPolicy : uint8_t {
    Beneath, // only links that stay beneath the root (open_beneath): the default
    Follow,  // any link, as nginx, apache, lighttpd and caddy by default
    Owner,   // a link only when it and its target have the same owner (nginx's
             // disable_symlinks if_not_owner, apache's SymLinksIfOwnerMatch)
};

// "beneath", "follow", "owner"; nullopt for anything else.
std::optional<SymlinkPolicy> parse_symlink_policy(std::string_view text);
std::string_view symlink_policy_name(SymlinkPolicy policy);

// open_beneath under `policy`. `rel_path` must be normalised (no ".."
// segment: decode_path's output), so only a symlink can lead out of the root.
// /proc magic links are refused whatever the policy. A link refused by Owner
// fails with ELOOP, as the walk's.
UniqueFd open_confined(int dir_fd, const char* rel_path, int flags, SymlinkPolicy policy);

} // namespace lepus
