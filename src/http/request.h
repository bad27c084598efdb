// Request: one request head, as views into the bytes of the protocol engine
// that received it: the HTTP/1.x parser (RequestParser, request_parser.h;
// valid until the connection discards the bytes of this request) or an
// HTTP/2 stream (valid until the stream ends). Both engines fill it the same
// way, so a handler never needs to know which one is below: the host is
// `host`, whatever field or pseudo-header carried it, and the version is
// explicit.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace lepus {

// The nine methods of RFC 9110 §9.3 and RFC 5789, and Extension for any other
// token (RFC 9110 §9.1: WebDAV's PROPFIND, MKCOL, ...): its name is then only
// in Request::method_text, which backends are given as it came.
enum class Method : uint8_t {
    Get,
    Head,
    Options,
    Post,
    Put,
    Delete,
    Patch,
    Trace,
    Connect,
    Extension
};

struct Header {
    std::string_view name;  // as sent (case preserved); compare case-insensitively
    std::string_view value; // leading and trailing whitespace trimmed
};

struct Request {
    Method method = Method::Get;
    std::string_view method_text; // "GET"
    std::string_view target;      // the request-target as sent
    std::string_view path;        // still percent-encoded; "*" for OPTIONS *
    std::string_view query;       // after '?', without it; empty when absent
    // HTTP/1.0 -> 1 and 0, HTTP/1.1 -> 1 and 1, HTTP/2 -> 2 and 1. The minor
    // is 1 over HTTP/2 so that the rules HTTP/1.0 alone lacks (persistent
    // connections without a keep-alive header, a Host) hold for it as for
    // HTTP/1.1 where the handlers test version_minor; what names the protocol
    // (SERVER_PROTOCOL, the access log) uses protocol_name(), never the numbers.
    int version_major = 1;
    int version_minor = 1;

    // The one host of the request, checked as the HTTP/1.1 Host field is
    // (is_valid_authority): from the absolute-form target when present, else
    // the Host header; over HTTP/2 :authority, else the host field (RFC 9113
    // §8.3.1). FastCGI's HTTP_HOST and the proxy's Host are this field.
    std::string_view host;
    std::span<const Header> headers; // every header line, in order

    // Framing (RFC 9112 §6): at most one of these is set.
    std::optional<uint64_t> content_length;
    bool chunked = false;

    bool keep_alive = true;       // after Connection and the version are applied
    bool expect_continue = false; // "Expect: 100-continue"

    // Headers the server itself reads, found once while parsing (empty when absent).
    std::string_view if_none_match, if_modified_since, if_match, if_unmodified_since;
    std::string_view range, if_range, accept_encoding;
    std::string_view referer, user_agent, content_type;

    bool has_body() const { return chunked || (content_length && *content_length > 0); }
    bool is_head() const { return method == Method::Head; }
};

// "HTTP/1.0", "HTTP/1.1" or "HTTP/2.0" (as nginx names HTTP/2 to FastCGI
// and in the access log).
std::string_view protocol_name(const Request& request);

// RFC 9110 §4.2.4, RFC 3986 §3.2.2: authority = host [ ":" port ], without
// userinfo; the port required when require_port (CONNECT). The check of the
// HTTP/1.1 Host field and of HTTP/2's :authority. Defined in request_head.cc.
bool is_valid_authority(std::string_view authority, bool require_port);

// The method's name, e.g. "GET"; empty for Extension (see method_text).
std::string_view method_name(Method method);

// The method `text` names (case-sensitive, RFC 9110 §9.1): one of the nine, or
// Extension for any other token; nullopt when `text` is no token (a 400).
// The nine are told apart by length and a compare, with no allocation.
std::optional<Method> method_from_name(std::string_view text);

// The member that holds the header field `name` (any case) for the handlers,
// If-None-Match to Content-Type above; nullptr for any other field. Defined in
// request_head.cc, beside the HTTP/1.1 parser's table of the same fields.
std::string_view Request::*request_field_member(std::string_view name);

} // namespace lepus
