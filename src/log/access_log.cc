#include "log/access_log.h"

#include "base/time_cache.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace lepus {

namespace {

constexpr char kHexDigits[] = "0123456789ABCDEF";

// nginx ngx_http_log_escape(): control bytes, '"', '\\', DEL and non-ASCII would let a
// client forge or break log lines. A table, because this runs on every byte of every line.
constexpr auto kNeedsEscape = [] {
    std::array<bool, 256> table{};
    for (int c = 0; c < 256; ++c) {
        table[size_t(c)] = c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
    }
    return table;
}();

bool needs_escape(unsigned char c) {
    return kNeedsEscape[c];
}

void append_escaped(std::string_view text, std::string& out) {
    size_t clean_start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!needs_escape(c)) continue;
        out.append(text.data() + clean_start, i - clean_start);
        const char escaped[4] = {'\\', 'x', kHexDigits[c >> 4], kHexDigits[c & 0xf]};
        out.append(escaped, sizeof escaped);
        clean_start = i + 1;
    }
    out.append(text.data() + clean_start, text.size() - clean_start);
}

void append_quoted_or_dash(std::string_view text, std::string& out) {
    out.push_back('"');
    if (text.empty()) {
        out.push_back('-');
    } else {
        append_escaped(text, out);
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
    out.append(" - - [");
    out.append(cached_access_log_time(entry.time)); // "22/Nov/2026:12:34:56 +0000"
    out.append("] \"");
    if (entry.method.empty() && entry.target.empty() && entry.protocol.empty()) {
        out.push_back('-'); // nothing parsed, e.g. a 400 on garbage or a timeout
    } else {
        append_escaped(entry.method, out);
        out.push_back(' ');
        append_escaped(entry.target, out);
        if (!entry.protocol.empty()) { // HTTP/0.9-style request lines have none
            out.push_back(' ');
            append_escaped(entry.protocol, out);
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
