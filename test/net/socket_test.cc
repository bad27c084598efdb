#include "net/socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus {
namespace {

TEST(SocketAddress, FormatsIpv4WithoutSprintf) {
    for (const char* text :
         {"0.0.0.0", "127.0.0.1", "10.20.30.40", "255.255.255.255", "1.100.9.99"}) {
        SocketAddress address = *parse_listen_address(std::string(text) + ":80");
        std::string out = "garbage";
        address.format_host(out);
        EXPECT_EQ(out, text);
    }
}

TEST(SocketAddress, FormatsIpv6) {
    SocketAddress address = *parse_listen_address("[::1]:8080");
    std::string out;
    address.format_host(out);
    EXPECT_EQ(out, "::1");
    EXPECT_EQ(address.to_string(), "[::1]:8080");
}

TEST(ParseListenAddress, Forms) {
    EXPECT_EQ(parse_listen_address("8080")->port(), 8080);
    EXPECT_EQ(parse_listen_address(":80")->port(), 80);
    EXPECT_EQ(parse_listen_address("127.0.0.1:0")->port(), 0);
    for (const char* bad : {"", "abc", "1.2.3.4:", "1.2.3.4:65536", "::1:80", "[::1]", "1.2.3:80"})
        EXPECT_FALSE(parse_listen_address(bad).has_value()) << bad;
}

} // namespace
} // namespace lepus

// The listener sets TCP_NODELAY once and every accepted socket inherits it
// (the acceptor no longer sets it per connection).
TEST(OpenListener, AcceptedSocketsInheritNoDelay) {
    std::string error;
    auto address = lepus::parse_listen_address("127.0.0.1:0");
    ASSERT_TRUE(address);
    lepus::UniqueFd listener = lepus::open_listener(*address, {}, error);
    ASSERT_TRUE(listener) << error;
    lepus::SocketAddress bound = lepus::local_address(listener.get());
    lepus::UniqueFd client(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::connect(client.get(), &bound.storage.any, bound.length), 0);
    int accepted = -1;
    for (int i = 0; i < 100 && accepted < 0; ++i) {
        accepted = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (accepted < 0) ::usleep(1000);
    }
    ASSERT_GE(accepted, 0);
    lepus::UniqueFd server(accepted);
    int value = 0;
    socklen_t length = sizeof value;
    ASSERT_EQ(getsockopt(server.get(), IPPROTO_TCP, TCP_NODELAY, &value, &length), 0);
    EXPECT_EQ(value, 1);
}
