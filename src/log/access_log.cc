#include "log/access_log.h"

#include "base/time_cache.h"
#include "log/log_escape.h"

#include <array>
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

} // namespace

void append_combined_line(const AccessLogEntry& entry, std::string& out) {
    out.append(entry.remote_addr.empty() ? std::string_view("-") : entry.remote_addr);
    out.append(" - ");
    if (entry.remote_user.empty())
        out.push_back('-');
    else
        append_log_escaped(entry.remote_user, out);
    out.append(" [");
    out.append(cached_access_log_time(entry.time)); // "22/Nov/2026:12:34:56 +0000"
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
