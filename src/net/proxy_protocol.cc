#include "net/proxy_protocol.h"

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <cstring>
#include <string>

namespace lepus {
namespace {

// haproxy's proxy-protocol.txt §2.1: "PROXY" SP proto SP src SP dst SP sport SP dport CRLF,
// 107 bytes at most with the CRLF.
constexpr std::string_view kV1Prefix = "PROXY ";
constexpr size_t kV1MaxSize = 107;
// §2.2: the v2 signature, then version/command, family/transport and a 16-bit length.
constexpr std::string_view kV2Signature{"\r\n\r\n\0\r\nQUIT\n", 12};
constexpr size_t kV2FixedSize = 16;

std::optional<uint16_t> parse_port(std::string_view text) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    // No sign, no leading zero (the spec's "0" | [1-9][0-9]*), 0..65535.
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port > 65535 ||
        (text.size() > 1 && text[0] == '0'))
        return std::nullopt;
    return uint16_t(port);
}

ProxyHeaderStatus parse_v1(std::string_view data, ProxyHeader& out) {
    size_t end = data.find("\r\n");
    if (end == std::string_view::npos)
        return data.size() < kV1MaxSize && data.find('\n') == std::string_view::npos
                   ? ProxyHeaderStatus::Again
                   : ProxyHeaderStatus::Error;
    if (end + 2 > kV1MaxSize) return ProxyHeaderStatus::Error;
    std::string_view line = data.substr(kV1Prefix.size(), end - kV1Prefix.size());
    out.size = end + 2;
    out.source.reset();
    if (line.starts_with("UNKNOWN")) return ProxyHeaderStatus::Done; // the rest is ignored
    std::string_view fields[5];
    for (std::string_view& field : fields) {
        size_t space = line.find(' ');
        field = line.substr(0, space);
        line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
        if (field.empty()) return ProxyHeaderStatus::Error;
    }
    if (!line.empty()) return ProxyHeaderStatus::Error;
    bool v4 = fields[0] == "TCP4";
    if (!v4 && fields[0] != "TCP6") return ProxyHeaderStatus::Error;
    auto source = parse_ip_address(fields[1]);
    auto destination = parse_ip_address(fields[2]);
    auto source_port = parse_port(fields[3]);
    if (!source || !destination || !source_port || !parse_port(fields[4]) ||
        (source->storage.any.sa_family == AF_INET) != v4 ||
        (destination->storage.any.sa_family == AF_INET) != v4)
        return ProxyHeaderStatus::Error;
    if (v4)
        source->storage.v4.sin_port = htons(*source_port);
    else
        source->storage.v6.sin6_port = htons(*source_port);
    out.source = source;
    return ProxyHeaderStatus::Done;
}

ProxyHeaderStatus parse_v2(std::span<const unsigned char> data, ProxyHeader& out) {
    if (data.size() < kV2FixedSize) return ProxyHeaderStatus::Again;
    unsigned version = data[12] >> 4, command = data[12] & 0x0f;
    if (version != 2 || command > 1) return ProxyHeaderStatus::Error;
    size_t length = size_t(data[14]) << 8 | data[15];
    if (kV2FixedSize + length > kMaxProxyHeader) return ProxyHeaderStatus::Error;
    if (data.size() < kV2FixedSize + length) return ProxyHeaderStatus::Again;
    out.size = kV2FixedSize + length;
    out.source.reset();
    if (command == 0) return ProxyHeaderStatus::Done; // LOCAL: the proxy's own connection
    const unsigned char* body = data.data() + kV2FixedSize;
    SocketAddress source;
    switch (data[13]) {
    case 0x11: // TCP over IPv4: source, destination, source port, destination port
        if (length < 12) return ProxyHeaderStatus::Error;
        source.storage.v4.sin_family = AF_INET;
        std::memcpy(&source.storage.v4.sin_addr, body, 4);
        std::memcpy(&source.storage.v4.sin_port, body + 8, 2); // both in network order
        source.length = sizeof(sockaddr_in);
        break;
    case 0x21: // TCP over IPv6
        if (length < 36) return ProxyHeaderStatus::Error;
        source.storage.v6.sin6_family = AF_INET6;
        std::memcpy(&source.storage.v6.sin6_addr, body, 16);
        std::memcpy(&source.storage.v6.sin6_port, body + 32, 2);
        source.length = sizeof(sockaddr_in6);
        break;
    default: // UNSPEC, UDP, Unix: §2.2 says to accept it and use the real connection's address
        return ProxyHeaderStatus::Done;
    }
    out.source = without_v4_mapping(source);
    return ProxyHeaderStatus::Done;
}

} // namespace

ProxyHeaderStatus parse_proxy_header(std::span<const char> data, ProxyHeader& out) {
    std::string_view text(data.data(), data.size());
    size_t common = std::min(text.size(), kV1Prefix.size());
    if (text.substr(0, common) == kV1Prefix.substr(0, common))
        return text.size() < kV1Prefix.size() ? ProxyHeaderStatus::Again : parse_v1(text, out);
    common = std::min(text.size(), kV2Signature.size());
    if (text.substr(0, common) != kV2Signature.substr(0, common)) return ProxyHeaderStatus::Error;
    return parse_v2({reinterpret_cast<const unsigned char*>(data.data()), data.size()}, out);
}

std::optional<SocketAddress> parse_ip_address(std::string_view text) {
    char copy[INET6_ADDRSTRLEN];
    if (text.empty() || text.size() >= sizeof copy) return std::nullopt;
    std::memcpy(copy, text.data(), text.size());
    copy[text.size()] = '\0';
    SocketAddress address;
    if (inet_pton(AF_INET, copy, &address.storage.v4.sin_addr) == 1) {
        address.storage.v4.sin_family = AF_INET;
        address.length = sizeof(sockaddr_in);
        return address;
    }
    if (inet_pton(AF_INET6, copy, &address.storage.v6.sin6_addr) == 1) {
        address.storage.v6.sin6_family = AF_INET6;
        address.length = sizeof(sockaddr_in6);
        return without_v4_mapping(address);
    }
    return std::nullopt;
}

bool TrustedProxies::trusts(const SocketAddress& address) const {
    if (address.storage.any.sa_family == AF_UNIX) return unix_clients_;
    return std::any_of(networks_.begin(), networks_.end(),
                       [&](const Cidr& network) { return network.contains(address); });
}

SocketAddress TrustedProxies::client_of(const SocketAddress& peer,
                                        std::span<const std::string_view> forwarded_for) const {
    SocketAddress client = peer;
    if (!trusts(peer)) return client;
    // Right to left over the values, and within each value.
    // NOLINTNEXTLINE(modernize-loop-convert): right to left, which a range-for cannot say in C++20
    for (auto value = forwarded_for.rbegin(); value != forwarded_for.rend(); ++value) {
        std::string_view rest = *value;
        while (!rest.empty()) {
            size_t comma = rest.rfind(',');
            std::string_view entry =
                comma == std::string_view::npos ? rest : rest.substr(comma + 1);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
            while (!entry.empty() && (entry.front() == ' ' || entry.front() == '\t'))
                entry.remove_prefix(1);
            while (!entry.empty() && (entry.back() == ' ' || entry.back() == '\t'))
                entry.remove_suffix(1);
            if (entry.empty()) continue;
            auto address = parse_ip_address(entry);
            if (!address) return client; // garbage: stop with the last good address
            client = *address;
            if (!trusts(client)) return client;
        }
    }
    return client;
}

} // namespace lepus
