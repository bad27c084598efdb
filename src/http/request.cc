#include "http/request.h"

#include "http/detail/request_syntax.h"

namespace lepus {

std::string_view protocol_name(const Request& request) {
    if (request.version_major >= 3) return "HTTP/3.0";
    if (request.version_major >= 2) return "HTTP/2.0";
    return request.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
}

std::string_view method_name(Method method) {
    switch (method) {
    case Method::Get:
        return "GET";
    case Method::Head:
        return "HEAD";
    case Method::Options:
        return "OPTIONS";
    case Method::Post:
        return "POST";
    case Method::Put:
        return "PUT";
    case Method::Delete:
        return "DELETE";
    case Method::Patch:
        return "PATCH";
    case Method::Trace:
        return "TRACE";
    case Method::Connect:
        return "CONNECT";
    case Method::Extension:
        return {};
    }
    return {}; // unreachable: every enumerator is listed above
}

std::optional<Method> method_from_name(std::string_view text) {
    switch (text.size()) {
    case 3:
        if (text == "GET") return Method::Get;
        if (text == "PUT") return Method::Put;
        break;
    case 4:
        if (text == "HEAD") return Method::Head;
        if (text == "POST") return Method::Post;
        break;
    case 5:
        if (text == "PATCH") return Method::Patch;
        if (text == "TRACE") return Method::Trace;
        break;
    case 6:
        if (text == "DELETE") return Method::Delete;
        break;
    case 7:
        if (text == "OPTIONS") return Method::Options;
        if (text == "CONNECT") return Method::Connect;
        break;
    }
    if (text.empty()) return std::nullopt;
    for (char c : text)
        if (!detail::has_class(c, detail::kTokenByte)) return std::nullopt;
    return Method::Extension;
}

} // namespace lepus
