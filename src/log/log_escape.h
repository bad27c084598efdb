// Escaping of untrusted bytes before they reach a log file, shared by the access
// log and the error log's copies of FastCGI stderr and CGI headers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lepus {

// The most bytes write_log_escaped can write for `size` bytes of text.
constexpr size_t log_escaped_bound(size_t size) {
    return 4 * size;
}

// Writes `text` at `out` with control bytes, '"', '\\', DEL and bytes >= 0x80 written
// as \xHH (nginx ngx_http_log_escape), so that the text can neither end a log line,
// forge another one, nor send escape sequences to a terminal that shows the log.
// `out` has room for log_escaped_bound(text.size()) bytes; returns the end.
char* write_log_escaped(std::string_view text, char* out);

// The same, appended to `out`.
void append_log_escaped(std::string_view text, std::string& out);

} // namespace lepus
