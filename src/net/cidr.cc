// CIDR parsing and matching. See cidr.h.
#include "net/cidr.h"

#include "log/log_escape.h"

#include <arpa/inet.h>
#include <cstring>

namespace lepus {
namespace {

constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff}; // RFC 4291 §2.5.5.2

std::optional<Cidr> reject(std::string_view text, std::string_view why, std::string& error) {
    // Escaped: the text may come from a config file and hold a newline or a NUL.
    // clear + push_back rather than `error = "'"`: gcc 12 warns about that
    // assignment with a false -Wrestrict (GCC bug 105651), fatal under -Werror.
    error.clear();
    error.push_back('\'');
    append_log_escaped(text, error);
    error.append("' is not a network (ADDRESS or ADDRESS/BITS): ").append(why);
    return std::nullopt;
}

} // namespace

// Strict where the old check was lenient: "10.1.2.3/" read as /0 allowed everyone
// (issue 14). inet_pton is strict too: no leading zeros or fewer than four parts in
// IPv4, no zone index in IPv6.
std::optional<Cidr> parse_cidr(std::string_view text, std::string& error) {
    // Also keeps a NUL (possible in a TOML string) from cutting the text short for inet_pton.
    if (text.find_first_not_of("0123456789abcdefABCDEF.:/") != std::string_view::npos)
        return reject(text, "unexpected character", error);
    size_t slash = text.find('/');
    std::string address(text.substr(0, slash));
    Cidr cidr;
    bool ipv6 = address.find(':') != std::string::npos;
    if (ipv6) {
        if (inet_pton(AF_INET6, address.c_str(), cidr.network.data()) != 1)
            return reject(text, "bad IPv6 address", error);
    } else {
        std::memcpy(cidr.network.data(), kMappedPrefix, sizeof kMappedPrefix);
        if (inet_pton(AF_INET, address.c_str(), cidr.network.data() + 12) != 1)
            return reject(text, "bad IPv4 address", error);
    }
    unsigned max_bits = ipv6 ? 128 : 32;
    unsigned bits = max_bits;
    if (slash != std::string_view::npos) {
        std::string_view digits = text.substr(slash + 1);
        if (digits.empty()) return reject(text, "no prefix length after '/'", error);
        if (digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string_view::npos)
            return reject(text, "the prefix length is not a number", error);
        bits = 0;
        for (char c : digits)
            bits = bits * 10 + unsigned(c - '0');
        if (bits > max_bits)
            return reject(text, ipv6 ? "prefix length above 128" : "prefix length above 32", error);
    }
    cidr.prefix_length = ipv6 ? bits : bits + 96;
    // Host bits set ("10.1.2.3/8") are accepted and cleared: the network is what the
    // prefix says, as nginx's allow does (nginx also warns; a status page allow list
    // gains nothing from refusing to start over it).
    for (unsigned i = 0; i < 16; ++i) {
        unsigned kept = cidr.prefix_length > i * 8 ? cidr.prefix_length - i * 8 : 0;
        if (kept < 8) cidr.network[i] &= static_cast<uint8_t>(0xff00u >> kept);
    }
    return cidr;
}

bool Cidr::contains(const SocketAddress& address) const {
    uint8_t have[16];
    if (address.storage.any.sa_family == AF_INET6) {
        std::memcpy(have, &address.storage.v6.sin6_addr, 16);
    } else if (address.storage.any.sa_family == AF_INET) {
        std::memcpy(have, kMappedPrefix, sizeof kMappedPrefix);
        std::memcpy(have + 12, &address.storage.v4.sin_addr, 4);
    } else {
        return false; // a unix socket has no network address
    }
    unsigned bits = prefix_length;
    for (size_t i = 0; i < 16 && bits > 0; ++i) {
        uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff00u >> bits);
        if ((have[i] & mask) != network[i]) return false;
        bits = bits >= 8 ? bits - 8 : 0;
    }
    return true;
}

} // namespace lepus
