#include "net/socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <netinet/tcp.h>

namespace lepus {

uint16_t SocketAddress::port() const {
    return ntohs(storage.any.sa_family == AF_INET6 ? storage.v6.sin6_port : storage.v4.sin_port);
}

void SocketAddress::format_host(std::string& out) const {
    if (storage.any.sa_family == AF_INET) {
        // glibc's inet_ntop formats IPv4 with sprintf, which cost about 1,500
        // instructions per access-log line; the digits are written directly.
        const auto* bytes = reinterpret_cast<const unsigned char*>(&storage.v4.sin_addr);
        char text[16];
        char* p = text;
        for (int i = 0; i < 4; ++i) {
            unsigned value = bytes[i];
            if (value >= 100) *p++ = char('0' + value / 100);
            if (value >= 10) *p++ = char('0' + value / 10 % 10);
            *p++ = char('0' + value % 10);
            if (i < 3) *p++ = '.';
        }
        out.assign(text, size_t(p - text));
        return;
    }
    char text[INET6_ADDRSTRLEN];
    const void* raw = storage.any.sa_family == AF_INET6
                          ? static_cast<const void*>(&storage.v6.sin6_addr)
                          : static_cast<const void*>(&storage.v4.sin_addr);
    out.clear();
    if (inet_ntop(storage.any.sa_family, raw, text, sizeof text)) out = text;
}

std::string SocketAddress::to_string() const {
    std::string host;
    format_host(host);
    if (storage.any.sa_family == AF_INET6) host = "[" + host + "]";
    return host + ":" + std::to_string(port());
}

std::optional<SocketAddress> parse_listen_address(std::string_view text) {
    std::string_view host;
    std::string_view port_text = text;
    bool v6 = false;
    if (!text.empty() && text.front() == '[') {
        size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::nullopt;
        host = text.substr(1, close - 1);
        port_text = text.substr(close + 2);
        v6 = true;
    } else if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) return std::nullopt; // bare v6 needs []
    }
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        port > 65535)
        return std::nullopt;

    SocketAddress address;
    std::string host_copy(host);
    if (v6) {
        address.storage.v6.sin6_family = AF_INET6;
        address.storage.v6.sin6_port = htons(port);
        if (inet_pton(AF_INET6, host_copy.c_str(), &address.storage.v6.sin6_addr) != 1)
            return std::nullopt;
        address.length = sizeof(sockaddr_in6);
    } else {
        address.storage.v4.sin_family = AF_INET;
        address.storage.v4.sin_port = htons(port);
        if (host.empty() || host == "*")
            address.storage.v4.sin_addr.s_addr = htonl(INADDR_ANY);
        else if (host == "localhost")
            address.storage.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (inet_pton(AF_INET, host_copy.c_str(), &address.storage.v4.sin_addr) != 1)
            return std::nullopt;
        address.length = sizeof(sockaddr_in);
    }
    return address;
}

UniqueFd open_listener(const SocketAddress& address, const ListenOptions& options,
                       std::string& error) {
    UniqueFd fd(::socket(address.storage.any.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         IPPROTO_TCP));
    auto fail = [&](const char* what) {
        error = std::string("cannot ") + what + " " + address.to_string() + ": " + strerror(errno);
        return UniqueFd();
    };
    if (!fd) return fail("create a socket for");
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (options.reuse_port && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return fail("set SO_REUSEPORT on");
    // Accepted sockets inherit TCP_NODELAY from their listener (Linux clones the
    // listener's socket for each child): one setsockopt here instead of one per
    // connection. Responses go out in one writev, so Nagle would only delay them.
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // [::]:80 serves IPv6 only, so that 0.0.0.0:80 can be listed beside it as in nginx.
    if (address.storage.any.sa_family == AF_INET6)
        setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(fd.get(), &address.storage.any, address.length) != 0) {
        if (errno == EADDRINUSE) {
            error = "port " + std::to_string(address.port()) + " is already in use (" +
                    address.to_string() + ")";
            return {};
        }
        return fail("bind");
    }
    if (::listen(fd.get(), options.backlog) != 0) return fail("listen on");
    return fd;
}

SocketAddress local_address(int fd) {
    SocketAddress address;
    address.length = sizeof address.storage;
    getsockname(fd, &address.storage.any, &address.length);
    return address;
}

} // namespace lepus
