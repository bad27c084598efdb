// Access-log lines in the Combined Log Format (Apache, nginx's default "combined"):
//   127.0.0.1 - - [22/Nov/2026:12:34:56 +0000] "GET /x HTTP/1.1" 200 612 "referer" "agent"
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace lepus {

// One request as it is logged. Views only: the caller keeps the bytes alive for the call.
struct AccessLogEntry {
    std::string_view remote_addr;
    // The basic-auth user name ($remote_user); empty prints "-".
    std::string_view remote_user{};
    time_t time;
    std::string_view method, target, protocol;
    // A request line the parser refused, logged as received (escaped) when
    // method, target and protocol are empty.
    std::string_view unparsed_line{};
    int status;
    uint64_t bytes_sent;
    std::string_view referer, user_agent;
};

// Appends one line ending in '\n' to `out`. The time is local time with its UTC offset,
// formatted once per second per thread. In the quoted fields '"', '\\', control bytes,
// DEL and bytes >= 0x80 become \xHH as in nginx; an empty referer or user agent prints
// "-", an empty request line prints "-" (or the unparsed line when there is one). The
// user name, a client's bytes, is escaped the same way, unquoted as nginx prints it.
void append_combined_line(const AccessLogEntry& entry, std::string& out);

} // namespace lepus
