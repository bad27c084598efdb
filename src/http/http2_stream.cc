#include "http/detail/http2_stream.h"

#include "base/ascii.h"

#include <charconv>

namespace lepus {

namespace {

// RFC 9113 §8.3.1: the host is :authority, else the host field; both there
// and different, the request is malformed, as it is with two host fields
// (RFC 9112 §3.2; nghttp2 resets such a stream first, this is the backstop). Then the value passes
// the HTTP/1.1 Host check (no userinfo, RFC 9110 §4.2.4): a handler cannot tell which engine it
// came by. Host names compare case-insensitively (RFC 3986 §3.2.2).
bool choose_host(std::string_view authority, bool has_authority, std::string_view host_field,
                 int host_fields, std::string_view& host) {
    if (host_fields > 1) return false;
    if (has_authority && host_fields == 1 && !ascii_iequals(authority, host_field)) return false;
    std::string_view chosen = has_authority ? authority : host_field;
    if (!chosen.empty() && !is_valid_authority(chosen, false)) return false;
    host = chosen; // refused, the request has none: the default site answers
    return true;
}

} // namespace

int Http2Stream::complete_request() {
    if (!cookie.empty()) fields.emplace_back(keep("cookie"), keep(cookie));
    // `text` is complete: views into it hold from here.
    std::string_view method_text = view(method);
    request.method_text = method_text;
    request.target = view(path);
    std::string_view target = request.target;
    size_t mark = target.find('?');
    request.path = target.substr(0, mark);
    request.query = mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
    request.version_major = 2;
    request.version_minor = 1; // see Request::version_minor
    bool host_ok =
        choose_host(view(authority), has_authority, view(host_field), host_fields, request.host);
    request.keep_alive = true;
    headers.clear();
    headers.reserve(fields.size());
    for (const auto& [name_ref, value_ref] : fields) {
        std::string_view n = view(name_ref);
        std::string_view value = view(value_ref);
        headers.push_back({n, value});
        if (n == "content-length") {
            uint64_t length = 0;
            if (std::from_chars(value.data(), value.data() + value.size(), length).ec ==
                std::errc())
                request.content_length = length;
        } else if (auto member = request_field_member(n)) {
            request.*member = value; // the same fields the HTTP/1.1 parser fills
        }
    }
    request.headers = headers;
    // A body of unknown length is "chunked" to the handlers (FastCGI
    // gathers it to give php-fpm a CONTENT_LENGTH).
    if (request_ended)
        request.content_length.reset();
    else if (!request.content_length)
        request.chunked = true;
    if (!host_ok) return 400;
    // RFC 9110 §9.1: any token is a method (WebDAV's go to the backends).
    std::optional<Method> known = method_from_name(method_text);
    if (!known) return 400;
    request.method = *known;
    return 0;
}

} // namespace lepus
