// Cidr: an IP network ("10.0.0.0/8", "::1/128") for allow lists such as --status-allow.
//
// Both families are kept in the IPv6 form, an IPv4 network as ::ffff:a.b.c.d with 96
// added to its prefix length, so that one comparison serves every client: an IPv4
// client matches an IPv6 network as ::ffff:a.b.c.d, and an IPv4-mapped client (what a
// dual-stack listener reports) matches IPv4 networks.
#pragma once

#include "net/socket.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lepus {

struct Cidr {
    std::array<uint8_t, 16> network{}; // host bits cleared
    unsigned prefix_length = 0;        // 0..128, in the IPv6 form

    // True when `address` (IPv4 or IPv6, port ignored) lies in this network.
    bool contains(const SocketAddress& address) const;
};

// "10.0.0.0/8", "::1/128", "0.0.0.0/0", or a bare address (= /32 or /128). nullopt and
// a one-line `error` naming the text for anything else: an empty prefix ("10.1.2.3/"),
// one out of range (/33, /129, /-1, /08x), garbage, spaces.
std::optional<Cidr> parse_cidr(std::string_view text, std::string& error);

} // namespace lepus
