// Sockets: listen addresses, listening sockets, peer addresses.
#pragma once

#include "base/unique_fd.h"

#include <cstdint>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>

namespace lepus {

// An IPv4 or IPv6 socket address, small enough to travel through the accept ring.
struct SocketAddress {
    union {
        sockaddr any;
        sockaddr_in v4;
        sockaddr_in6 v6;
    } storage{};
    socklen_t length = 0;

    uint16_t port() const;
    // "127.0.0.1" or "::1" (no brackets, no port), written into `out` (cleared first).
    void format_host(std::string& out) const;
    // "127.0.0.1:8080" or "[::1]:8080".
    std::string to_string() const;
};

// Parses "ADDR:PORT", "[V6]:PORT", ":PORT" or "PORT" (all addresses, IPv4).
// Port 0 is allowed (the kernel picks one). nullopt on anything else.
std::optional<SocketAddress> parse_listen_address(std::string_view text);

struct ListenOptions {
    int backlog = 4096;
    bool reuse_port = false;
};

// A non-blocking, close-on-exec listening TCP socket bound to `address`.
// On failure returns an empty fd and sets `error` to one line naming the address.
UniqueFd open_listener(const SocketAddress& address, const ListenOptions& options,
                       std::string& error);

// The address a socket is bound to (useful after binding port 0).
SocketAddress local_address(int fd);

} // namespace lepus
