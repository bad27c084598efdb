#include "log/access_log.h"

#include "log/log_escape.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace lepus {

namespace {

void append_quoted_or_dash(std::string_view text, std::string& out) {
    out.push_back('"');
    if (text.empty()) {
        out.push_back('-');
    } else {
        append_log_escaped(text, out);
    }
    out.push_back('"');
}

template <typename Integer> void append_number(Integer value, std::string& out) {
    char digits[24];
    auto result = std::to_chars(digits, digits + sizeof digits, value);
    out.append(digits, result.ptr);
}

// "22/Nov/2026:12:34:56 +0000". strftime's %b would follow LC_TIME; the log format is
// always English, as in nginx.
std::string_view common_log_time(time_t time) {
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    thread_local time_t cached_second = -1;
    thread_local char text[40];
    thread_local size_t length = 0;
    if (time != cached_second) {
        tm local;
        localtime_r(&time, &local);
        const long offset_minutes = local.tm_gmtoff / 60;
        const long offset_abs = std::labs(offset_minutes);
        int n = std::snprintf(text, sizeof text, "%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld",
                              local.tm_mday, kMonths[local.tm_mon], local.tm_year + 1900,
                              local.tm_hour, local.tm_min, local.tm_sec,
                              offset_minutes < 0 ? '-' : '+', offset_abs / 60, offset_abs % 60);
        length = n > 0 ? size_t(n) : 0;
        cached_second = time;
    }
    return {text, length};
}

} // namespace

void append_combined_line(const AccessLogEntry& entry, std::string& out) {
    out.append(entry.remote_addr.empty() ? std::string_view("-") : entry.remote_addr);
    out.append(" - - [");
    out.append(common_log_time(entry.time));
    out.append("] \"");
    if (entry.method.empty() && entry.target.empty() && entry.protocol.empty()) {
        // Refused by the parser ("PRI * HTTP/2.0"), or nothing came at all.
        if (entry.unparsed_line.empty())
            out.push_back('-');
        else
            append_log_escaped(entry.unparsed_line, out);
    } else {
        append_log_escaped(entry.method, out);
        out.push_back(' ');
        append_log_escaped(entry.target, out);
        if (!entry.protocol.empty()) { // HTTP/0.9-style request lines have none
            out.push_back(' ');
            append_log_escaped(entry.protocol, out);
        }
    }
    out.append("\" ");
    append_number(entry.status, out);
    out.push_back(' ');
    append_number(entry.bytes_sent, out);
    out.push_back(' ');
    append_quoted_or_dash(entry.referer, out);
    out.push_back(' ');
    append_quoted_or_dash(entry.user_agent, out);
    out.push_back('\n');
}

} // namespace lepus
