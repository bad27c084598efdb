#include "http/detail/http2_head.h"

#include "base/ascii.h"

#include <charconv>

namespace lepus::detail {

namespace {

// Fields of a response head that are HTTP/1.1 connection management, never
// sent on HTTP/2 (RFC 9113 §8.2.2).
bool is_connection_field(std::string_view name) {
    for (std::string_view field :
         {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te"})
        if (ascii_iequals(name, field)) return true;
    return false;
}

} // namespace

bool is_backend_own_field(std::string_view name) {
    for (std::string_view own : {"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Trailer",
                                 "Upgrade", "Proxy-Connection", "Content-Length", "Date", "Server"})
        if (ascii_iequals(name, own)) return true;
    return false;
}

bool has_no_body(const Request& request, int status) {
    return request.is_head() || status < 200 || status == 204 || status == 304;
}

void head_to_fields(int status, std::string_view head, std::string& text,
                    std::vector<nghttp2_nv>& fields) {
    static char status_name[] = ":status";
    char digits[8];
    size_t digits_size = std::to_chars(digits, digits + sizeof digits, status).ptr - digits;
    text.assign(head);
    text.append(digits, digits_size);
    auto field = [](char* name, size_t name_size, char* value, size_t value_size) {
        return nghttp2_nv{reinterpret_cast<uint8_t*>(name), reinterpret_cast<uint8_t*>(value),
                          name_size, value_size, NGHTTP2_NV_FLAG_NONE};
    };
    fields.clear();
    fields.push_back(
        field(status_name, sizeof status_name - 1, text.data() + head.size(), digits_size));
    char* base = text.data();
    std::string_view rest(base, head.size());
    size_t at = rest.find("\r\n");
    while (at != std::string_view::npos && at + 2 < rest.size()) {
        at += 2;
        size_t end = rest.find("\r\n", at);
        if (end == std::string_view::npos || end == at) break;
        std::string_view line = rest.substr(at, end - at);
        size_t line_at = at;
        at = end;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        if (is_connection_field(line.substr(0, colon))) continue;
        for (size_t i = 0; i < colon; ++i)
            base[line_at + i] = ascii_lower(base[line_at + i]);
        std::string_view value = trim_ows(line.substr(colon + 1));
        fields.push_back(
            field(base + line_at, colon, base + (value.data() - rest.data()), value.size()));
    }
}

} // namespace lepus::detail
