// Autoindex: the HTML listing of a directory, for directories without an index
// file when --autoindex is on (nginx's autoindex module, HTML format).
#pragma once

#include <string>
#include <string_view>

namespace lepus {

// Appends to `out` a listing of the directory open as `dir_fd` whose decoded URL
// path is `url_path` (ending with '/'). Names are sorted (directories first),
// HTML-escaped in text and percent-encoded in hrefs, with size and mtime (UTC).
// Names starting with '.' are listed only when `show_hidden`. Symlinks are listed
// only when they resolve beneath `root_fd` (checked via `rel_dir`, the
// directory's path relative to the root, "" or ending with '/'); other entries
// that are neither regular files nor directories are left out. Returns 0 or errno.
int render_autoindex(int root_fd, std::string_view rel_dir, int dir_fd, std::string_view url_path,
                     bool show_hidden, std::string& out);

// Appends `text` with &, <, >, " and ' replaced by character references.
void append_html_escaped(std::string_view text, std::string& out);

} // namespace lepus
