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

TEST(ParseListen, BarePortMeansBothFamilies) {
    for (const char* text : {"8080", ":8080", "*:8080"}) {
        auto listen = parse_listen(text);
        ASSERT_TRUE(listen.has_value()) << text;
        EXPECT_TRUE(listen->dual_stack) << text;
        EXPECT_EQ(listen->address.to_string(), "[::]:8080") << text;
    }
    // An explicit address keeps its one family.
    EXPECT_FALSE(parse_listen("0.0.0.0:80")->dual_stack);
    EXPECT_FALSE(parse_listen("[::]:80")->dual_stack);
    EXPECT_EQ(parse_listen("[::]:80")->address.to_string(), "[::]:80");
}

TEST(ParseListen, UnixSockets) {
    EXPECT_EQ(parse_listen("unix:/run/lepus.sock")->unix_path, "/run/lepus.sock");
    for (const char* bad : {"unix:", "unix:relative.sock"})
        EXPECT_FALSE(parse_listen(bad).has_value()) << bad;
    EXPECT_FALSE(parse_listen("unix:/" + std::string(200, 'x')).has_value()); // sun_path is 108
}

TEST(OpenListener, DualStackServesIpv4AndIpv6Clients) {
    std::string error;
    UniqueFd listener = open_listener(*parse_listen("0"), {}, error);
    ASSERT_TRUE(listener) << error;
    SocketAddress bound = local_address(listener.get());
    if (bound.storage.any.sa_family != AF_INET6) GTEST_SKIP() << "no IPv6 on this host";
    for (const char* client : {"127.0.0.1", "::1"}) {
        UniqueFd fd(::socket(client[0] == ':' ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        SocketAddress to = *parse_listen_address(std::string(client[0] == ':' ? "[::1]" : client) +
                                                 ":" + std::to_string(bound.port()));
        EXPECT_EQ(::connect(fd.get(), &to.storage.any, to.length), 0) << client;
    }
}

TEST(OpenListener, UnixSocketReplacesAStaleFileAndRefusesALiveOne) {
    char directory[] = "/tmp/lepus-socket-XXXXXX";
    ASSERT_NE(mkdtemp(directory), nullptr);
    ListenAddress address = *parse_listen(std::string("unix:") + directory + "/lepus.sock");
    std::string error;
    {
        UniqueFd first = open_listener(address, {}, error);
        ASSERT_TRUE(first) << error;
        UniqueFd second = open_listener(address, {}, error);
        EXPECT_FALSE(second); // someone accepts there
        EXPECT_NE(error.find("in use"), std::string::npos) << error;
    }
    error.clear();
    UniqueFd again = open_listener(address, {}, error); // the file stayed, nobody listens
    EXPECT_TRUE(again) << error;
    remove_unix_listener(address);
    EXPECT_NE(::access(address.unix_path.c_str(), F_OK), 0);
    ::rmdir(directory);
}

// Issue 33: the copies of a reuseport group share the port among themselves,
// never with another group (a second lepus of the same user) or a plain socket.
TEST(OpenListeners, GroupSharesThePortWithNobodyElse) {
    std::string error;
    ListenOptions options;
    options.reuse_port = true;
    std::vector<UniqueFd> group = open_listeners(*parse_listen("127.0.0.1:0"), options, 3, error);
    ASSERT_EQ(group.size(), 3u) << error;
    uint16_t port = local_address(group.front().get()).port();
    for (const UniqueFd& fd : group)
        EXPECT_EQ(local_address(fd.get()).port(), port);
    ListenAddress same = *parse_listen("127.0.0.1:" + std::to_string(port));
    EXPECT_TRUE(open_listeners(same, options, 2, error).empty());
    EXPECT_EQ(error, "port " + std::to_string(port) +
                         " is already in use (127.0.0.1:" + std::to_string(port) + ")");
    error.clear();
    EXPECT_FALSE(open_listener(same, {}, error));
    // The kernel's own rule would let a SO_REUSEPORT socket of this uid join.
    UniqueFd joiner(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    setsockopt(joiner.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    EXPECT_EQ(::bind(joiner.get(), &same.address.storage.any, same.address.length), 0);
}

TEST(WithoutV4Mapping, UnmapsOnlyMappedAddresses) {
    SocketAddress mapped = *parse_listen_address("[::ffff:192.0.2.1]:80");
    EXPECT_EQ(without_v4_mapping(mapped).to_string(), "192.0.2.1:80");
    SocketAddress v6 = *parse_listen_address("[2001:db8::1]:80");
    EXPECT_EQ(without_v4_mapping(v6).to_string(), "[2001:db8::1]:80");
}

} // namespace
} // namespace lepus

namespace {

// A connected pair through a listener opened with `options`: the client's
// socket and the accepted one (both empty when something failed).
struct AcceptedPair {
    lepus::UniqueFd client, server;
};

AcceptedPair connect_through(const lepus::ListenOptions& options) {
    std::string error;
    auto address = lepus::parse_listen_address("127.0.0.1:0");
    lepus::UniqueFd listener = lepus::open_listener(*address, options, error);
    if (!listener) return {};
    lepus::SocketAddress bound = lepus::local_address(listener.get());
    AcceptedPair pair{lepus::UniqueFd(::socket(AF_INET, SOCK_STREAM, 0)), {}};
    if (::connect(pair.client.get(), &bound.storage.any, bound.length) != 0) return {};
    int accepted = -1;
    for (int i = 0; i < 100 && accepted < 0; ++i) {
        accepted = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (accepted < 0) ::usleep(1000);
    }
    pair.server = lepus::UniqueFd(accepted);
    return pair;
}

int tcp_option(int fd, int option) {
    int value = 0;
    socklen_t length = sizeof value;
    return getsockopt(fd, IPPROTO_TCP, option, &value, &length) == 0 ? value : -1;
}

} // namespace

// The listener sets TCP_NODELAY once and every accepted socket inherits it
// (the acceptor no longer sets it per connection).
TEST(OpenListener, AcceptedSocketsInheritNoDelay) {
    AcceptedPair pair = connect_through({});
    ASSERT_TRUE(pair.server);
    EXPECT_EQ(tcp_option(pair.server.get(), TCP_NODELAY), 1);
}

// --notsent-lowat: set once on the listener, and every accepted socket has it
// (a socket opened without it has the kernel's default, which is no limit).
TEST(OpenListener, AcceptedSocketsInheritTheNotSentLowWaterMark) {
    lepus::ListenOptions options;
    options.notsent_lowat = 32 * 1024;
    AcceptedPair pair = connect_through(options);
    ASSERT_TRUE(pair.server);
    EXPECT_EQ(tcp_option(pair.server.get(), TCP_NOTSENT_LOWAT), 32 * 1024);
    EXPECT_NE(tcp_option(pair.client.get(), TCP_NOTSENT_LOWAT), 32 * 1024);
}

// --defer-accept on: a connection that has sent nothing is not handed to
// accept(); its first bytes make it acceptable, with the bytes already there.
TEST(OpenListener, DeferAcceptHoldsASilentConnectionUntilItsRequest) {
    std::string error;
    auto address = lepus::parse_listen_address("127.0.0.1:0");
    ASSERT_TRUE(address);
    lepus::ListenOptions options;
    options.defer_accept_s = 1;
    lepus::UniqueFd listener = lepus::open_listener(*address, options, error);
    ASSERT_TRUE(listener) << error;
    int value = 0;
    socklen_t length = sizeof value;
    ASSERT_EQ(getsockopt(listener.get(), IPPROTO_TCP, TCP_DEFER_ACCEPT, &value, &length), 0);
    EXPECT_GT(value, 0);
    lepus::SocketAddress bound = lepus::local_address(listener.get());
    lepus::UniqueFd client(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::connect(client.get(), &bound.storage.any, bound.length), 0);
    ::usleep(50000); // the handshake is long done: only the deferral holds it back
    EXPECT_LT(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC), 0);
    EXPECT_EQ(errno, EAGAIN);
    ASSERT_EQ(::write(client.get(), "GET", 3), 3);
    int accepted = -1;
    for (int i = 0; i < 500 && accepted < 0; ++i) {
        accepted = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (accepted < 0) ::usleep(1000);
    }
    ASSERT_GE(accepted, 0);
    lepus::UniqueFd server(accepted);
    char buffer[8];
    EXPECT_EQ(::recv(server.get(), buffer, sizeof buffer, MSG_DONTWAIT), 3);
}
