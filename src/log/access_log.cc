#include "log/access_log.h"

#include "base/time_cache.h"
#include "log/log_escape.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace lepus {

namespace {

char* put(char* out, std::string_view text) {
    std::memcpy(out, text.data(), text.size());
    return out + text.size();
}

// A literal's bytes, its length known when compiled (a copy of a few moves).
template <size_t N> char* put(char* out, const char (&text)[N]) {
    std::memcpy(out, text, N - 1);
    return out + N - 1;
}

char* put_quoted_or_dash(char* out, std::string_view text) {
    *out++ = '"';
    if (text.empty())
        *out++ = '-';
    else
        out = write_log_escaped(text, out);
    *out++ = '"';
    return out;
}

constexpr size_t kMaxDigits = 20; // of a uint64_t, or an int with its sign

template <typename Integer> char* put_number(char* out, Integer value) {
    return std::to_chars(out, out + kMaxDigits, value).ptr;
}

} // namespace

// Written through a pointer into room made once for the longest the line can
// be: appended piece by piece (twenty-odd appends and push_backs, each with its
// capacity check) the line was a fifth of an HTTP/1.1 keepalive request's
// instructions (callgrind).
void append_combined_line(const AccessLogEntry& entry, std::string& out) {
    std::string_view time = cached_access_log_time(entry.time); // "22/Nov/2026:12:34:56 +0000"
    size_t escaped = entry.remote_user.size() + entry.method.size() + entry.target.size() +
                     entry.protocol.size() + entry.unparsed_line.size() + entry.referer.size() +
                     entry.user_agent.size();
    constexpr size_t kFixed = 64 + 2 * kMaxDigits; // the punctuation, dashes and numbers
    size_t start = out.size();
    out.resize(start + entry.remote_addr.size() + time.size() + log_escaped_bound(escaped) +
               kFixed);
    char* at = out.data() + start;
    at = entry.remote_addr.empty() ? put(at, "-") : put(at, entry.remote_addr);
    at = put(at, " - ");
    at = entry.remote_user.empty() ? put(at, "-") : write_log_escaped(entry.remote_user, at);
    at = put(at, " [");
    at = put(at, time);
    at = put(at, "] \"");
    if (entry.method.empty() && entry.target.empty() && entry.protocol.empty()) {
        // Refused by the parser ("PRI * HTTP/2.0"), or nothing came at all.
        at =
            entry.unparsed_line.empty() ? put(at, "-") : write_log_escaped(entry.unparsed_line, at);
    } else {
        at = write_log_escaped(entry.method, at);
        *at++ = ' ';
        at = write_log_escaped(entry.target, at);
        if (!entry.protocol.empty()) { // HTTP/0.9-style request lines have none
            *at++ = ' ';
            at = write_log_escaped(entry.protocol, at);
        }
    }
    at = put(at, "\" ");
    at = put_number(at, entry.status);
    *at++ = ' ';
    at = put_number(at, entry.bytes_sent);
    *at++ = ' ';
    at = put_quoted_or_dash(at, entry.referer);
    *at++ = ' ';
    at = put_quoted_or_dash(at, entry.user_agent);
    *at++ = '\n';
    out.resize(size_t(at - out.data()));
}

} // namespace lepus
