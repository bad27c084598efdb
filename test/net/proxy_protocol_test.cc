// PROXY protocol headers and X-Forwarded-For (src/net/proxy_protocol.cc).
#include "net/proxy_protocol.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

using namespace std::literals;

std::string v2_header(unsigned char command, unsigned char family, const std::string& body) {
    std::string header = "\r\n\r\n\0\r\nQUIT\n"s;
    header.push_back(char(0x20 | command));
    header.push_back(char(family));
    header.push_back(char(body.size() >> 8));
    header.push_back(char(body.size() & 0xff));
    return header + body;
}

// TCP over IPv4, 192.0.2.7:51000 -> 10.0.0.1:443, with a TLV (type 4, NOOP) after.
std::string v2_tcp4() {
    std::string body = "\xc0\x00\x02\x07"s + "\x0a\x00\x00\x01"s + "\xc7\x38"s + "\x01\xbb"s;
    body += "\x04\x00\x02xx"s;
    return v2_header(1, 0x11, body);
}

ProxyHeaderStatus parse(std::string_view data, ProxyHeader& header) {
    return parse_proxy_header({data.data(), data.size()}, header);
}

std::string source_of(std::string_view data) {
    ProxyHeader header;
    EXPECT_EQ(parse(data, header), ProxyHeaderStatus::Done) << data;
    EXPECT_TRUE(header.source.has_value());
    return header.source ? header.source->to_string() : "";
}

TEST(ProxyHeader, V1Tcp4AndTcp6) {
    EXPECT_EQ(source_of("PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\nGET / HTTP/1.1\r\n"),
              "192.0.2.7:51000");
    EXPECT_EQ(source_of("PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\n"), "[2001:db8::7]:51000");
    ProxyHeader header;
    std::string_view line = "PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n";
    ASSERT_EQ(parse(std::string(line) + "GET /", header), ProxyHeaderStatus::Done);
    EXPECT_EQ(header.size, line.size()); // the request behind it is not consumed
}

TEST(ProxyHeader, V1UnknownHasNoSource) {
    ProxyHeader header;
    ASSERT_EQ(parse("PROXY UNKNOWN\r\n", header), ProxyHeaderStatus::Done);
    EXPECT_FALSE(header.source.has_value());
    EXPECT_EQ(header.size, 15u);
    ASSERT_EQ(parse("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", header), ProxyHeaderStatus::Done);
    EXPECT_FALSE(header.source.has_value());
}

TEST(ProxyHeader, V1Malformed) {
    for (std::string_view bad :
         {"PROXY TCP4 192.0.2.7 10.0.0.1 51000\r\n"sv, "PROXY TCP4 192.0.2.7 10.0.0.1 1 2 3\r\n"sv,
          "PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n"sv, "PROXY TCP6 192.0.2.7 10.0.0.1 1 2\r\n"sv,
          "PROXY TCP4 192.0.2.7 10.0.0.1 70000 2\r\n"sv, "PROXY TCP4 192.0.2.7 10.0.0.1 01 2\r\n"sv,
          "PROXY TCP4  192.0.2.7 10.0.0.1 1 2\r\n"sv, "PROXY UDP4 192.0.2.7 10.0.0.1 1 2\r\n"sv,
          "PROXY TCP4 192.0.2.7 10.0.0.1 1 2\n"sv, "GET / HTTP/1.1\r\n"sv, "proxy tcp4"sv}) {
        ProxyHeader header;
        EXPECT_EQ(parse(bad, header), ProxyHeaderStatus::Error) << bad;
    }
    // 107 bytes at most, CRLF included: a line that goes on is refused before its end.
    ProxyHeader header;
    EXPECT_EQ(parse("PROXY UNKNOWN " + std::string(100, 'x'), header), ProxyHeaderStatus::Error);
}

TEST(ProxyHeader, V2Tcp4Tcp6AndLocal) {
    ProxyHeader header;
    std::string tcp4 = v2_tcp4();
    ASSERT_EQ(parse(tcp4 + "GET /", header), ProxyHeaderStatus::Done);
    EXPECT_EQ(header.size, tcp4.size()); // TLVs included
    EXPECT_EQ(header.source->to_string(), "192.0.2.7:51000");

    std::string v6(36, '\0');
    v6[0] = '\x20', v6[1] = '\x01', v6[2] = '\x0d', v6[3] = '\xb8', v6[15] = '\x07';
    v6[32] = '\xc7', v6[33] = '\x38';
    EXPECT_EQ(source_of(v2_header(1, 0x21, v6)), "[2001:db8::7]:51000");

    ASSERT_EQ(parse(v2_header(0, 0x00, ""), header), ProxyHeaderStatus::Done); // LOCAL
    EXPECT_FALSE(header.source.has_value());
    ASSERT_EQ(parse(v2_header(1, 0x31, std::string(216, 'u')), header), ProxyHeaderStatus::Done);
    EXPECT_FALSE(header.source.has_value()); // a Unix socket source: the connection's own
}

TEST(ProxyHeader, V2Malformed) {
    ProxyHeader header;
    std::string bad_version = v2_tcp4();
    bad_version[12] = '\x11';
    EXPECT_EQ(parse(bad_version, header), ProxyHeaderStatus::Error);
    std::string bad_command = v2_tcp4();
    bad_command[12] = '\x22';
    EXPECT_EQ(parse(bad_command, header), ProxyHeaderStatus::Error);
    EXPECT_EQ(parse(v2_header(1, 0x11, "short"), header), ProxyHeaderStatus::Error);
    EXPECT_EQ(parse(v2_header(1, 0x11, std::string(kMaxProxyHeader, 'x')), header),
              ProxyHeaderStatus::Error);
    std::string bad_signature = v2_tcp4();
    bad_signature[5] = 'x';
    EXPECT_EQ(parse(bad_signature, header), ProxyHeaderStatus::Error);
}

// Every prefix of a header is Again, then the whole is Done (the connection
// peeks at what has arrived so far).
TEST(ProxyHeader, SplitAtEveryByteOffset) {
    for (const std::string& whole :
         {std::string("PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n"), v2_tcp4()}) {
        for (size_t cut = 0; cut < whole.size(); ++cut) {
            ProxyHeader header;
            EXPECT_EQ(parse(std::string_view(whole).substr(0, cut), header),
                      ProxyHeaderStatus::Again)
                << cut;
        }
        ProxyHeader header;
        EXPECT_EQ(parse(whole, header), ProxyHeaderStatus::Done);
        EXPECT_EQ(header.size, whole.size());
    }
}

TrustedProxies trusting(std::initializer_list<const char*> networks, bool unix_clients = false) {
    std::vector<Cidr> list;
    std::string error;
    for (const char* text : networks)
        list.push_back(*parse_cidr(text, error));
    return TrustedProxies(std::move(list), unix_clients);
}

std::string client(const TrustedProxies& trusted, const char* peer,
                   std::initializer_list<std::string_view> forwarded_for) {
    std::vector<std::string_view> values(forwarded_for);
    SocketAddress address = trusted.client_of(*parse_ip_address(peer), values);
    std::string host;
    address.format_host(host);
    return host;
}

TEST(TrustedProxies, RightmostUntrustedAddress) {
    TrustedProxies trusted = trusting({"10.0.0.0/8", "127.0.0.1"});
    EXPECT_EQ(client(trusted, "127.0.0.1", {"203.0.113.9"}), "203.0.113.9");
    // A client-supplied (forged) entry left of the real one is not believed.
    EXPECT_EQ(client(trusted, "127.0.0.1", {"6.6.6.6, 203.0.113.9, 10.1.1.1"}), "203.0.113.9");
    // Two header lines are one list, in order.
    EXPECT_EQ(client(trusted, "127.0.0.1", {"6.6.6.6, 203.0.113.9", "10.1.1.1"}), "203.0.113.9");
    EXPECT_EQ(client(trusted, "127.0.0.1", {"10.2.2.2, 10.1.1.1"}), "10.2.2.2"); // all trusted
    EXPECT_EQ(client(trusted, "127.0.0.1", {" 2001:db8::9 "}), "2001:db8::9");
    EXPECT_EQ(client(trusted, "127.0.0.1", {}), "127.0.0.1");
    // Garbage stops the walk with the last good address.
    EXPECT_EQ(client(trusted, "127.0.0.1", {"203.0.113.9, junk, 10.1.1.1"}), "10.1.1.1");
    EXPECT_EQ(client(trusted, "127.0.0.1", {"junk"}), "127.0.0.1");
}

TEST(TrustedProxies, UntrustedPeersAreNotBelieved) {
    TrustedProxies trusted = trusting({"10.0.0.0/8"});
    EXPECT_EQ(client(trusted, "127.0.0.1", {"203.0.113.9"}), "127.0.0.1");
    EXPECT_EQ(client(TrustedProxies(), "10.0.0.1", {"203.0.113.9"}), "10.0.0.1");
}

TEST(TrustedProxies, UnixClients) {
    SocketAddress unix_peer;
    unix_peer.storage.any.sa_family = AF_UNIX;
    EXPECT_TRUE(trusting({}, true).trusts(unix_peer));
    EXPECT_FALSE(trusting({"0.0.0.0/0", "::/0"}).trusts(unix_peer));
    EXPECT_FALSE(trusting({}, true).empty());
    EXPECT_TRUE(TrustedProxies().empty());
}

} // namespace
} // namespace lepus
