// Request paths: percent-decoding and normalisation (RFC 3986 §2.1, §5.2.4) of the
// raw path once, before anything touches the file system, and the reverse
// encoding for the paths lepus writes back (Location, autoindex hrefs).
#pragma once

#include <string>
#include <string_view>

namespace lepus {

// Decodes `raw` (the path as sent, starting with '/') into `out` and normalises
// it: "." segments and empty segments (duplicate slashes) vanish, ".." removes the
// previous segment. Returns 0, or 400 for a path that does not start with '/', an
// invalid escape, a NUL (raw or %00), or a ".." that would rise above the root (as
// nginx does). On success `out` starts with '/', has no "." or ".." segment, no
// "//" and no NUL, and ends with '/' exactly when the raw path designated a
// directory (trailing '/', or a last segment "." or "..").
int decode_path(std::string_view raw, std::string& out);
// True when `raw` is already in that normal form (nothing to decode or
// normalise): decode_path would give it back as it is, so it can be used as is.
bool is_normal_path(std::string_view raw);

// True when a segment of the (decoded) path starts with '.': a hidden name.
// The first segment ".well-known" (RFC 8615) is not one.
bool has_hidden_segment(std::string_view path);

// Appends `path` to `out` with every byte outside RFC 3986 pchar-safe characters
// ("/" kept) percent-encoded, so that it is safe in a header or an href.
void append_percent_encoded(std::string_view path, std::string& out);

} // namespace lepus
