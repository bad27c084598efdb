// Access-log formats other than Combined. See access_log_format.h.
#include "log/access_log_format.h"

#include "base/time_cache.h"
#include "log/log_escape.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>

namespace lepus {
namespace {

using Variable = AccessLogFormat::Variable;

// nginx's names, in the order of the Variable enum.
constexpr std::string_view kNames[] = {
    "remote_addr",  "remote_user",     "time_local",   "time_iso8601",
    "request",      "request_method",  "request_uri",  "server_protocol",
    "status",       "body_bytes_sent", "request_time", "upstream_response_time",
    "http_referer", "http_user_agent", "host",         "ssl_protocol",
    "http2",        "scheme",          "msec",
};

void append_number(uint64_t value, std::string& out) {
    char digits[24];
    out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

// "0.042": seconds with milliseconds, as nginx's $request_time.
void append_seconds(uint64_t ms, std::string& out) {
    append_number(ms / 1000, out);
    out.push_back('.');
    char frac[4] = {char('0' + ms % 1000 / 100), char('0' + ms % 100 / 10), char('0' + ms % 10)};
    out.append(frac, 3);
}

// "+0100" -> "+01:00", as nginx's $time_iso8601; made once per second per
// thread (localtime_r takes the time zone's lock: a tenth of a JSON line).
void append_iso8601(time_t time, std::string& out) {
    thread_local time_t cached_second = -1;
    thread_local char cached[40];
    thread_local size_t cached_size = 0;
    if (time != cached_second) {
        struct tm local;
        localtime_r(&time, &local);
        char text[40];
        size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);
        cached_size = 0;
        if (n >= 5) {
            std::memcpy(cached, text, n - 2);
            cached[n - 2] = ':';
            std::memcpy(cached + n - 1, text + n - 2, 2);
            cached_size = n + 1;
        }
        cached_second = time;
    }
    out.append(cached, cached_size);
}

// The request line as Combined logs it (or the unparsed one, or "-").
template <typename Escape>
void append_request(const AccessLogEntry& entry, std::string& out, Escape escape) {
    if (entry.method.empty() && entry.target.empty() && entry.protocol.empty()) {
        if (entry.unparsed_line.empty())
            out.push_back('-');
        else
            escape(entry.unparsed_line, out);
        return;
    }
    escape(entry.method, out);
    out.push_back(' ');
    escape(entry.target, out);
    if (!entry.protocol.empty()) {
        out.push_back(' ');
        escape(entry.protocol, out);
    }
}

// A value in JSON: '"', '\\' and every byte outside printable ASCII as \u00HH
// (a byte >= 0x80 as the code point of its value: the line stays valid JSON
// whatever a client sent, as nginx's escape=json does for control bytes).
void append_json_escaped(std::string_view text, std::string& out) {
    static constexpr char kHex[] = "0123456789abcdef";
    size_t run = 0; // the start of the bytes that go as they are, appended at once
    for (size_t i = 0; i < text.size(); ++i) {
        auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') continue;
        out.append(text.data() + run, i - run);
        char escaped[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(escaped, sizeof escaped);
        run = i + 1;
    }
    out.append(text.data() + run, text.size() - run);
}

// One variable as text; `escape` for the values a client chose.
template <typename Escape>
void append_variable(Variable variable, const AccessLogEntry& entry, const AccessLogExtras& extras,
                     std::string& out, Escape escape) {
    auto escaped_or_dash = [&](std::string_view text) {
        if (text.empty())
            out.push_back('-');
        else
            escape(text, out);
    };
    switch (variable) {
    case Variable::RemoteAddr:
        return escaped_or_dash(entry.remote_addr);
    case Variable::RemoteUser:
        return escaped_or_dash(entry.remote_user);
    case Variable::TimeLocal:
        out.append(cached_access_log_time(entry.time));
        return;
    case Variable::TimeIso8601:
        return append_iso8601(entry.time, out);
    case Variable::Request:
        return append_request(entry, out, escape);
    case Variable::RequestMethod:
        return escaped_or_dash(entry.method);
    case Variable::RequestUri:
        return escaped_or_dash(entry.target);
    case Variable::ServerProtocol:
        return escaped_or_dash(entry.protocol);
    case Variable::Status:
        return append_number(uint64_t(entry.status), out);
    case Variable::BodyBytesSent:
        return append_number(entry.bytes_sent, out);
    case Variable::RequestTime:
        return append_seconds(extras.request_time_ms, out);
    case Variable::UpstreamResponseTime:
        if (!extras.upstream_time_ms) return out.push_back('-');
        return append_seconds(*extras.upstream_time_ms, out);
    case Variable::HttpReferer:
        return escaped_or_dash(entry.referer);
    case Variable::HttpUserAgent:
        return escaped_or_dash(entry.user_agent);
    case Variable::Host:
        return escaped_or_dash(extras.host);
    case Variable::SslProtocol:
        return escaped_or_dash(extras.ssl_protocol);
    case Variable::Http2:
        out.append(extras.http2); // nginx prints an empty string without HTTP/2
        return;
    case Variable::Scheme:
        out.append(extras.scheme);
        return;
    case Variable::Msec:
        append_number(uint64_t(entry.time), out);
        out.append(".000");
        return;
    }
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

} // namespace

const std::vector<std::string_view>& AccessLogFormat::variable_names() {
    static const std::vector<std::string_view> names(std::begin(kNames), std::end(kNames));
    return names;
}

std::optional<AccessLogFormat> AccessLogFormat::compile(std::string_view text, std::string& error) {
    AccessLogFormat format;
    if (text == "combined") return format;
    if (text == "json") {
        format.kind_ = Kind::Json;
        return format;
    }
    format.kind_ = Kind::Custom;
    if (text.find_first_of("\r\n") != std::string_view::npos) {
        error = "access_log_format: one line (each request's line ends in a newline of its own)";
        return std::nullopt;
    }
    std::string literal;
    for (size_t i = 0; i < text.size();) {
        if (text[i] != '$') {
            literal.push_back(text[i++]);
            continue;
        }
        // "$name" or "${name}" (to write a letter right after it).
        bool braced = i + 1 < text.size() && text[i + 1] == '{';
        size_t begin = i + 1 + braced, end = begin;
        while (end < text.size() && is_name_char(text[end]))
            ++end;
        std::string_view name = text.substr(begin, end - begin);
        if (braced && (end >= text.size() || text[end] != '}')) {
            error = "access_log_format: '${' without its '}'";
            return std::nullopt;
        }
        const auto& names = variable_names();
        auto found = std::find(names.begin(), names.end(), name);
        if (name.empty() || found == names.end()) {
            error = "access_log_format: unknown variable '$" + std::string(name) + "'";
            return std::nullopt;
        }
        if (!literal.empty()) format.pieces_.push_back({std::move(literal), std::nullopt});
        literal.clear();
        format.pieces_.push_back({{}, Variable(found - names.begin())});
        i = end + braced;
    }
    if (!literal.empty()) format.pieces_.push_back({std::move(literal), std::nullopt});
    return format;
}

void AccessLogFormat::append(const AccessLogEntry& entry, const AccessLogExtras& extras,
                             std::string& out) const {
    if (kind_ == Kind::Combined) return append_combined_line(entry, out);
    if (kind_ == Kind::Json) return append_json(entry, extras, out);
    for (const Piece& piece : pieces_) {
        if (!piece.variable)
            out.append(piece.literal);
        else
            append_variable(
                *piece.variable, entry, extras, out,
                [](std::string_view text, std::string& to) { append_log_escaped(text, to); });
    }
    out.push_back('\n');
}

void AccessLogFormat::append_json(const AccessLogEntry& entry, const AccessLogExtras& extras,
                                  std::string& out) const {
    auto escape = [](std::string_view text, std::string& to) { append_json_escaped(text, to); };
    // Strings quoted, numbers bare; "-" where Combined prints it, so that a
    // field is always there with the same type.
    static constexpr std::pair<std::string_view, Variable> kFields[] = {
        {"time", Variable::TimeIso8601},
        {"remote_addr", Variable::RemoteAddr},
        {"remote_user", Variable::RemoteUser},
        {"host", Variable::Host},
        {"request", Variable::Request},
        {"method", Variable::RequestMethod},
        {"uri", Variable::RequestUri},
        {"protocol", Variable::ServerProtocol},
        {"status", Variable::Status},
        {"body_bytes_sent", Variable::BodyBytesSent},
        {"request_time", Variable::RequestTime},
        {"upstream_response_time", Variable::UpstreamResponseTime},
        {"referer", Variable::HttpReferer},
        {"user_agent", Variable::HttpUserAgent},
        {"scheme", Variable::Scheme},
        {"ssl_protocol", Variable::SslProtocol},
        {"http2", Variable::Http2},
    };
    out.push_back('{');
    bool first = true;
    for (auto [name, variable] : kFields) {
        if (!first) out.push_back(',');
        first = false;
        out.push_back('"');
        out.append(name);
        out.append("\":");
        bool number = variable == Variable::Status || variable == Variable::BodyBytesSent ||
                      variable == Variable::RequestTime ||
                      (variable == Variable::UpstreamResponseTime && extras.upstream_time_ms);
        if (!number) out.push_back('"');
        append_variable(variable, entry, extras, out, escape);
        if (!number) out.push_back('"');
    }
    out.append("}\n");
}

} // namespace lepus
