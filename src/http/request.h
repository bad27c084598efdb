// Request: one parsed HTTP/1.x request head, as views into the connection's
// input buffer. Produced by RequestParser (request_parser.h); valid until the
// connection discards the bytes of this request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace lepus {

enum class Method : uint8_t { Get, Head, Options, Post, Put, Delete, Patch, Trace, Connect };

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
    int version_minor = 1;        // HTTP/1.0 -> 0, HTTP/1.1 -> 1

    // From the absolute-form target when present, else the Host header.
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

// The method's name, e.g. "GET".
std::string_view method_name(Method method);

// The method `text` names (case-sensitive, RFC 9110 §9.1), if lepus implements it.
std::optional<Method> method_from_name(std::string_view text);

// The member that holds the header field `name` (any case) for the handlers,
// If-None-Match to Content-Type above; nullptr for any other field. Defined in
// request_head.cc, beside the HTTP/1.1 parser's table of the same fields.
std::string_view Request::*request_field_member(std::string_view name);

} // namespace lepus
