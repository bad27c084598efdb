#include "http/request.h"

namespace lepus {

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
    }
    return "GET"; // unreachable: every enumerator is listed above
}

} // namespace lepus
