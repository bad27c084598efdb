// Sockets: listen addresses, listening sockets, peer addresses.
#pragma once

#include "base/unique_fd.h"

#include <cstdint>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <vector>

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
    // "127.0.0.1" or "::1" (no brackets, no port), written into `out` (cleared
    // first); "unix:" for a client of a Unix socket, as nginx logs it.
    void format_host(std::string& out) const;
    // "127.0.0.1:8080" or "[::1]:8080" ("unix:" for a Unix socket client).
    std::string to_string() const;
};

// An IPv4-mapped IPv6 address (::ffff:1.2.3.4, what a dual-stack socket reports
// for an IPv4 client) as the IPv4 address it is; any other address unchanged.
SocketAddress without_v4_mapping(const SocketAddress& address);

// A --listen value: a TCP address, or a Unix socket path.
struct ListenAddress {
    SocketAddress address;   // TCP; unused for a Unix socket
    bool dual_stack = false; // "PORT", ":PORT", "*:PORT": [::] serving IPv4 too, else 0.0.0.0
    std::string unix_path;   // "unix:/run/lepus.sock" -> "/run/lepus.sock"
};

// Parses what parse_listen_address takes, and "unix:/PATH". A bare port (or
// ":PORT", "*:PORT") means every address of both families: one [::] socket
// with IPV6_V6ONLY off, as `python3 -m http.server`. "[::]:PORT" stays IPv6
// only, so that "0.0.0.0:PORT" can be listed beside it as in nginx.
std::optional<ListenAddress> parse_listen(std::string_view text);

// Parses "ADDR:PORT", "[V6]:PORT", ":PORT" or "PORT" (all addresses, IPv4).
// Port 0 is allowed (the kernel picks one). nullopt on anything else.
std::optional<SocketAddress> parse_listen_address(std::string_view text);

struct ListenOptions {
    int backlog = 4096;
    // The socket may be shared with more of this process's (open_listeners):
    // it claims the address alone (a port anyone holds fails with EADDRINUSE)
    // and then gets SO_REUSEPORT, for copies to join.
    bool reuse_port = false;
    // TCP_DEFER_ACCEPT, in seconds (0: off): the kernel completes the handshake
    // but hands the connection to accept() only once its first bytes arrived
    // (or, for a client that sends nothing, after about this long), so an
    // accepted connection can be read and answered at once, without a round
    // through the poller. nginx's `listen ... deferred`; h2o sets it always.
    int defer_accept_s = 0;
    // TCP_NOTSENT_LOWAT, in bytes (0: the kernel's default, no limit): how
    // much a socket may hold that is written but not yet sent. Past it a write
    // returns short and the socket is writable again only when the backlog is
    // drained. Without a limit a large sendfile queues megabytes, and the
    // kernel then transmits them from the receiver's ACK processing: on
    // loopback that runs on the client's core (measured, docs/BENCHMARKS.md,
    // issue 15: 10 MiB bodies about 1.7x the GB/s with 32 KiB).
    int notsent_lowat = 0;
};

// A non-blocking, close-on-exec listening TCP socket bound to `address`.
// On failure returns an empty fd and sets `error` to one line naming the address.
UniqueFd open_listener(const SocketAddress& address, const ListenOptions& options,
                       std::string& error);

// The same for a ListenAddress. A dual-stack one falls back to 0.0.0.0 where
// the host has no IPv6. A Unix socket replaces a stale socket file (one that
// nobody accepts on) and refuses to touch a live one or any other file; the
// caller removes the file at exit (remove_unix_listener).
UniqueFd open_listener(const ListenAddress& address, const ListenOptions& options,
                       std::string& error);

// `copies` listening sockets of one address (copies > 1 needs
// options.reuse_port, and a TCP address): the first claims the address as
// open_listener does, the others join it with SO_REUSEPORT, on the port it
// got. One per reactor for in-reactor accept. The port is never shared with
// another process: a second lepus on a taken port fails with EADDRINUSE.
// Empty on failure, with `error` set.
std::vector<UniqueFd> open_listeners(const ListenAddress& address, const ListenOptions& options,
                                     size_t copies, std::string& error);

// Removes the socket file of a Unix listener, if it is still a socket.
void remove_unix_listener(const ListenAddress& address);

// The address a socket is bound to (useful after binding port 0).
SocketAddress local_address(int fd);

} // namespace lepus
