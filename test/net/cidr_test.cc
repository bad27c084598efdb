// Strict CIDR parsing and matching (src/net/cidr.cc).
#include "net/cidr.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace lepus {
namespace {

using namespace std::literals;

SocketAddress client(const char* text) {
    SocketAddress address;
    if (std::string_view(text).find(':') != std::string_view::npos) {
        address.storage.v6.sin6_family = AF_INET6;
        EXPECT_EQ(inet_pton(AF_INET6, text, &address.storage.v6.sin6_addr), 1) << text;
        address.length = sizeof(sockaddr_in6);
    } else {
        address.storage.v4.sin_family = AF_INET;
        EXPECT_EQ(inet_pton(AF_INET, text, &address.storage.v4.sin_addr), 1) << text;
        address.length = sizeof(sockaddr_in);
    }
    return address;
}

Cidr parse(std::string_view text) {
    std::string error;
    std::optional<Cidr> cidr = parse_cidr(text, error);
    EXPECT_TRUE(cidr.has_value()) << text << ": " << error;
    EXPECT_EQ(error, "");
    return cidr.value_or(Cidr{});
}

TEST(ParseCidr, AcceptsNetworksAndBareAddresses) {
    EXPECT_EQ(parse("10.0.0.0/8").prefix_length, 96u + 8);
    EXPECT_EQ(parse("127.0.0.1").prefix_length, 128u); // a bare IPv4 address is /32
    EXPECT_EQ(parse("0.0.0.0/0").prefix_length, 96u);
    EXPECT_EQ(parse("::1/128").prefix_length, 128u);
    EXPECT_EQ(parse("::1").prefix_length, 128u);
    EXPECT_EQ(parse("::/0").prefix_length, 0u);
    EXPECT_EQ(parse("2001:db8::/32").prefix_length, 32u);
    EXPECT_EQ(parse("::ffff:10.0.0.0/104").prefix_length, 104u);
    EXPECT_EQ(parse("192.168.1.0/024").prefix_length, 96u + 24); // three digits at most
}

// Issue 14: "10.1.2.3/" was read as /0 and let everyone read the status page.
TEST(ParseCidr, RejectsEveryMalformedForm) {
    for (std::string_view bad : std::initializer_list<std::string_view>{"10.1.2.3/",
                                                                        "::1/",
                                                                        "10.0.0.0/33",
                                                                        "10.0.0.0/99",
                                                                        "10.0.0.0/1000",
                                                                        "::/129",
                                                                        "::1/256",
                                                                        "10.0.0.0/-1",
                                                                        "10.0.0.0/+8",
                                                                        "10.0.0.0/08x",
                                                                        "10.0.0.0/8/8",
                                                                        "10.0.0.0/ 8",
                                                                        "10.0.0.0 /8",
                                                                        " 10.0.0.0/8",
                                                                        "10.0.0.0/8 ",
                                                                        "10.0.0.0/0x8",
                                                                        "",
                                                                        "/",
                                                                        "/8",
                                                                        "garbage",
                                                                        "localhost",
                                                                        "10.0.0",
                                                                        "10.0.0.0.0",
                                                                        "10.0.0.256",
                                                                        "010.0.0.1",
                                                                        "1.2.3.4/8a",
                                                                        "fe80::1%eth0/64",
                                                                        ":::1",
                                                                        "1::2::3",
                                                                        "10.0.0.0\n/8",
                                                                        "10.0.0.0/8\0"sv,
                                                                        "10.0.0.0\0/8"sv}) {
        std::string error;
        EXPECT_FALSE(parse_cidr(bad, error).has_value()) << bad;
        EXPECT_NE(error, "") << bad;
        EXPECT_EQ(error.find_first_of(std::string_view("\n\0", 2)), std::string::npos) << error;
        EXPECT_NE(error.find("is not a network"), std::string::npos) << error;
    }
    std::string error;
    parse_cidr("10.1.2.3/", error);
    EXPECT_EQ(error, "'10.1.2.3/' is not a network (ADDRESS or ADDRESS/BITS): no prefix length "
                     "after '/'");
    parse_cidr("10.0.0.0/33", error);
    EXPECT_NE(error.find("above 32"), std::string::npos) << error;
    parse_cidr("10.0.0.0\n/8", error); // one line, whatever the text holds
    EXPECT_EQ(error, "'10.0.0.0\\x0A/8' is not a network (ADDRESS or ADDRESS/BITS): unexpected "
                     "character");
    parse_cidr("::/129", error);
    EXPECT_NE(error.find("above 128"), std::string::npos) << error;
}

TEST(CidrContains, Ipv4) {
    Cidr net = parse("10.0.0.0/8");
    EXPECT_TRUE(net.contains(client("10.0.0.0")));
    EXPECT_TRUE(net.contains(client("10.255.255.255")));
    EXPECT_FALSE(net.contains(client("11.0.0.0")));
    EXPECT_FALSE(net.contains(client("9.255.255.255")));
    Cidr host = parse("192.168.1.7");
    EXPECT_TRUE(host.contains(client("192.168.1.7")));
    EXPECT_FALSE(host.contains(client("192.168.1.6")));
    Cidr odd = parse("172.16.0.0/12");
    EXPECT_TRUE(odd.contains(client("172.31.255.1")));
    EXPECT_FALSE(odd.contains(client("172.32.0.1")));
}

TEST(CidrContains, SlashZeroIsEveryoneOfItsFamily) {
    Cidr all_v4 = parse("0.0.0.0/0");
    EXPECT_TRUE(all_v4.contains(client("1.2.3.4")));
    EXPECT_TRUE(all_v4.contains(client("255.255.255.255")));
    EXPECT_TRUE(all_v4.contains(client("::ffff:1.2.3.4")));
    EXPECT_FALSE(all_v4.contains(client("2001:db8::1")));
    Cidr all = parse("::/0");
    EXPECT_TRUE(all.contains(client("2001:db8::1")));
    EXPECT_TRUE(all.contains(client("1.2.3.4"))); // as ::ffff:1.2.3.4
}

TEST(CidrContains, Ipv6) {
    Cidr loopback = parse("::1/128");
    EXPECT_TRUE(loopback.contains(client("::1")));
    EXPECT_FALSE(loopback.contains(client("::2")));
    EXPECT_FALSE(loopback.contains(client("127.0.0.1")));
    Cidr doc = parse("2001:db8::/33");
    EXPECT_TRUE(doc.contains(client("2001:db8:7fff::1")));
    EXPECT_FALSE(doc.contains(client("2001:db8:8000::1")));
}

TEST(CidrContains, MappedAddressesMeetIpv4Networks) {
    // A dual-stack listener reports an IPv4 client as ::ffff:a.b.c.d.
    Cidr loopback = parse("127.0.0.0/8");
    EXPECT_TRUE(loopback.contains(client("::ffff:127.0.0.1")));
    EXPECT_FALSE(loopback.contains(client("::ffff:128.0.0.1")));
    EXPECT_FALSE(loopback.contains(client("::127.0.0.1"))); // IPv4-compatible is not mapped
    // An IPv4 client against an IPv6 network is compared as ::ffff:a.b.c.d.
    Cidr mapped = parse("::ffff:10.0.0.0/104");
    EXPECT_TRUE(mapped.contains(client("10.9.8.7")));
    EXPECT_FALSE(mapped.contains(client("11.9.8.7")));
}

TEST(CidrContains, HostBitsInTheNetworkAreIgnored) {
    Cidr net = parse("10.1.2.3/8"); // nginx accepts it too (with a warning)
    EXPECT_TRUE(net.contains(client("10.200.0.1")));
    EXPECT_FALSE(net.contains(client("11.1.2.3")));
    Cidr net6 = parse("2001:db8::ffff/32");
    EXPECT_TRUE(net6.contains(client("2001:db8:1::")));
}

TEST(CidrContains, UnixSocketPeerIsInNoNetwork) {
    SocketAddress unix_peer;
    unix_peer.storage.any.sa_family = AF_UNIX;
    EXPECT_FALSE(parse("::/0").contains(unix_peer));
}

} // namespace
} // namespace lepus
