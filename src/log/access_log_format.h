// AccessLogFormat: `access_log_format` (--access-log-format), the shape of an
// access-log line, compiled once when the config is read:
//   "combined"  the default: append_combined_line (log/access_log.h), untouched
//   "json"      one JSON object per line, for log shippers (Caddy-style)
//   any other   nginx's log_format text with $variables, e.g.
//               '$remote_addr $host "$request" $status $request_time'
// A text is compiled into a list of pieces (a literal or a variable), so a
// line costs one pass over them; an unknown variable is refused at load.
#pragma once

#include "log/access_log.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

// What a format may name beyond the Combined fields (views, as AccessLogEntry).
struct AccessLogExtras {
    std::string_view host;        // $host: the request's host, without its port
    uint64_t request_time_ms = 0; // $request_time, printed as seconds.milliseconds
    // $upstream_response_time: from handing the request to the backend to the
    // end of the response; nullopt ("-") when no backend answered.
    std::optional<uint64_t> upstream_time_ms = std::nullopt;
    std::string_view ssl_protocol = {}; // $ssl_protocol: "TLSv1.3", empty without TLS
    std::string_view http2 = {};        // $http2: "h2", "h2c" or empty, as nginx
    std::string_view scheme = {};       // $scheme: "http" or "https"
};

class AccessLogFormat {
public:
    enum class Kind : uint8_t { Combined, Json, Custom };

    // "combined", "json" or a format text; nullopt and one line in `error`
    // (naming the unknown variable) when it cannot be compiled.
    static std::optional<AccessLogFormat> compile(std::string_view text, std::string& error);

    Kind kind() const { return kind_; }
    // Appends one line ending in '\n'. Values from the client are escaped as in
    // the Combined format (\xHH); in JSON as \u00HH, so every line parses.
    void append(const AccessLogEntry& entry, const AccessLogExtras& extras, std::string& out) const;

    // The variables a format text may name, for messages and the docs' test.
    static const std::vector<std::string_view>& variable_names();

    enum class Variable : uint8_t {
        RemoteAddr,
        RemoteUser,
        TimeLocal,
        TimeIso8601,
        Request,
        RequestMethod,
        RequestUri,
        ServerProtocol,
        Status,
        BodyBytesSent,
        RequestTime,
        UpstreamResponseTime,
        HttpReferer,
        HttpUserAgent,
        Host,
        SslProtocol,
        Http2,
        Scheme,
        Msec,
    };

private:
    struct Piece {
        std::string literal; // when not a variable
        std::optional<Variable> variable;
    };
    void append_json(const AccessLogEntry& entry, const AccessLogExtras& extras,
                     std::string& out) const;

    Kind kind_ = Kind::Combined;
    std::vector<Piece> pieces_;
};

} // namespace lepus
