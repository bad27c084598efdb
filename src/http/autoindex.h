// Autoindex: the listing of a directory, for directories without an index file
// when --autoindex is on (nginx's autoindex module): HTML for people, or JSON
// for scripts (as nginx's `autoindex_format json`, chosen here per request with
// ?format=json).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lepus {

enum class AutoindexFormat { Html, Json };

// Width of the name column of the HTML listing, in characters: longer names are
// cut to kAutoindexNameWidth - 3 characters followed by "..>" (nginx's
// NGX_HTTP_AUTOINDEX_NAME_LEN).
inline constexpr size_t kAutoindexNameWidth = 50;

// Json when the query string has a parameter "format=json", else Html.
AutoindexFormat autoindex_format_for(std::string_view query);

// The Content-Type value of a listing in `format`.
std::string_view autoindex_content_type(AutoindexFormat format);

// Appends to `out` a listing of the directory open as `dir_fd` whose decoded URL
// path is `url_path` (ending with '/'). Names are sorted (directories first),
// with size and mtime (UTC). HTML: names HTML-escaped in text, percent-encoded
// in hrefs, columns aligned in characters (UTF-8 code points). JSON: an array of
// {"name", "type": "file"|"directory", "mtime" (IMF-fixdate), "size" (files)}.
// Names starting with '.' are listed only when `show_hidden`. Symlinks are
// listed only when they resolve beneath `root_fd` (checked via `rel_dir`, the
// directory's path relative to the root, "" or ending with '/'); other entries
// that are neither regular files nor directories are left out. Returns 0 or errno.
int render_autoindex(int root_fd, std::string_view rel_dir, int dir_fd, std::string_view url_path,
                     bool show_hidden, AutoindexFormat format, std::string& out);

// Appends `text` with &, <, >, " and ' replaced by character references, and
// control characters shown as '?' (as ls does), so that a file name holding a
// newline cannot break a line of the listing.
void append_html_escaped(std::string_view text, std::string& out);

// Appends `text` as the inside of a JSON string (RFC 8259 §7): quotes,
// backslashes and control characters escaped, and each byte that is not part of
// valid UTF-8 replaced by U+FFFD, so the document stays valid JSON whatever
// bytes a file name holds.
void append_json_escaped(std::string_view text, std::string& out);

// Number of characters (UTF-8 code points) in `text`: the bytes that do not
// continue a sequence (so a stray lead byte counts as one character).
size_t utf8_length(std::string_view text);

// Byte length of the first `characters` characters of `text` (all of it when
// shorter), never splitting a UTF-8 sequence.
size_t utf8_prefix_bytes(std::string_view text, size_t characters);

} // namespace lepus
