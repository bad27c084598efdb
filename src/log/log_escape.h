// Escaping of untrusted bytes before they reach a log file, shared by the access
// log and the error log's copies of FastCGI stderr and CGI headers.
#pragma once

#include <string>
#include <string_view>

namespace lepus {

// Appends `text` to `out` with control bytes, '"', '\\', DEL and bytes >= 0x80 written
// as \xHH (nginx ngx_http_log_escape), so that the text can neither end a log line,
// forge another one, nor send escape sequences to a terminal that shows the log.
void append_log_escaped(std::string_view text, std::string& out);

} // namespace lepus
