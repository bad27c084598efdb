#include "upstream/backend_address.h"

#include <arpa/inet.h>
#include <charconv>
#include <cstring>
#include <netinet/in.h>

namespace lepus::upstream {

std::optional<BackendAddress> parse_backend_address(std::string_view text) {
    BackendAddress address;
    address.text.assign(text);
    if (text.starts_with("unix:")) {
        std::string_view path = text.substr(5);
        auto* un = reinterpret_cast<sockaddr_un*>(&address.storage);
        if (path.empty() || path.size() >= sizeof un->sun_path ||
            path.find('\0') != std::string_view::npos)
            return std::nullopt;
        un->sun_family = AF_UNIX;
        std::memcpy(un->sun_path, path.data(), path.size());
        address.length = socklen_t(offsetof(sockaddr_un, sun_path) + path.size() + 1);
        return address;
    }
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view host = text.substr(0, colon), port_text = text.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535)
        return std::nullopt;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        std::string v6(host.substr(1, host.size() - 2));
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
        if (inet_pton(AF_INET6, v6.c_str(), &in6->sin6_addr) != 1) return std::nullopt;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(uint16_t(port));
        address.length = sizeof *in6;
        return address;
    }
    std::string v4(host == "localhost" ? std::string_view("127.0.0.1") : host);
    auto* in = reinterpret_cast<sockaddr_in*>(&address.storage);
    if (inet_pton(AF_INET, v4.c_str(), &in->sin_addr) != 1) return std::nullopt;
    in->sin_family = AF_INET;
    in->sin_port = htons(uint16_t(port));
    address.length = sizeof *in;
    return address;
}

} // namespace lepus::upstream
