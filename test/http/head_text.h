// For tests: a complete response's head as the HTTP/1.1 engine writes it.
#pragma once

#include "http/response.h"

#include <string>

namespace lepus {

inline std::string head_text(const Response& response, time_t now, int version_minor = 1) {
    std::string text;
    write_http1_head(response.head, now, response.keep_alive, version_minor, text);
    return text;
}

} // namespace lepus
