#include "http/detail/http2_stream.h"

#include <charconv>

namespace lepus {

std::optional<Method> Http2Stream::complete_request() {
    if (!cookie.empty()) fields.emplace_back(keep("cookie"), keep(cookie));
    // `text` is complete: views into it hold from here.
    std::string_view method_text = view(method);
    request.method_text = method_text;
    request.target = view(path);
    std::string_view target = request.target;
    size_t mark = target.find('?');
    request.path = target.substr(0, mark);
    request.query = mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
    request.version_minor = 1; // HTTP/1.1 semantics for the handlers
    request.host = view(authority);
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
    return method_from_name(method_text);
}

} // namespace lepus
