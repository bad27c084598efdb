// What a trusted proxy says of the client: the PROXY protocol header that
// haproxy, AWS NLB and others put at the start of a connection (v1 text or v2
// binary, haproxy's doc/proxy-protocol.txt), and the X-Forwarded-For list.
//
// The parser takes bytes and needs no socket: the connection peeks at what has
// arrived, asks for the header's size, and consumes exactly that, so that the
// request behind it is left for the HTTP engine.
#pragma once

#include "net/cidr.h"
#include "net/socket.h"

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace lepus {

// The longest header accepted: v1 is at most 107 bytes; v2 is 16 bytes plus
// addresses and TLVs, which haproxy keeps well under this.
inline constexpr size_t kMaxProxyHeader = 1024;

enum class ProxyHeaderStatus { Done, Again, Error };

struct ProxyHeader {
    size_t size = 0; // bytes of the header, to consume
    // The client's address and port; empty for v2 LOCAL (a health check by the
    // proxy itself), v1 UNKNOWN and address families other than TCP over IPv4/6.
    std::optional<SocketAddress> source;
};

// Parses a PROXY header at the start of `data`: Done with `out` filled, Again
// when `data` is a strict prefix of one (read more), Error when it is not one.
ProxyHeaderStatus parse_proxy_header(std::span<const char> data, ProxyHeader& out);

// "192.0.2.1" or "2001:db8::1" (no port, no brackets) as an address with port 0.
std::optional<SocketAddress> parse_ip_address(std::string_view text);

// The proxies whose word about the client is taken (--real-ip-from): networks,
// and "unix:" for every client of a Unix socket (a proxy on the same host).
class TrustedProxies {
public:
    TrustedProxies() = default;
    TrustedProxies(std::vector<Cidr> networks, bool unix_clients)
        : networks_(std::move(networks)), unix_clients_(unix_clients) {}

    bool empty() const { return networks_.empty() && !unix_clients_; }
    bool trusts(const SocketAddress& address) const;

    // The client of a request that came from `peer` with these X-Forwarded-For
    // values (each a comma-separated list, in header order), as nginx's
    // real_ip_recursive on: from the right, the first address that is not a
    // trusted proxy (the leftmost when all are). `peer` itself when it is not
    // trusted or the list is empty; the walk stops at an entry that is not an
    // address, keeping what it had.
    SocketAddress client_of(const SocketAddress& peer,
                            std::span<const std::string_view> forwarded_for) const;

private:
    std::vector<Cidr> networks_;
    bool unix_clients_ = false;
};

} // namespace lepus
