// parse_backend_address: the backends' addresses, unix and TCP.
#include "upstream/backend_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string>

namespace lepus::upstream {
namespace {

TEST(BackendAddress, Unix) {
    auto address = parse_backend_address("unix:/run/php/php8.2-fpm.sock");
    ASSERT_TRUE(address);
    EXPECT_EQ(address->family(), AF_UNIX);
    EXPECT_EQ(address->text, "unix:/run/php/php8.2-fpm.sock");
    EXPECT_FALSE(parse_backend_address("unix:"));
    EXPECT_FALSE(parse_backend_address("unix:/" + std::string(200, 'a')));
}

TEST(BackendAddress, Tcp) {
    auto v4 = parse_backend_address("127.0.0.1:9000");
    ASSERT_TRUE(v4);
    EXPECT_EQ(v4->family(), AF_INET);
    EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in*>(&v4->storage)->sin_port), 9000);
    auto v6 = parse_backend_address("[::1]:9000");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->family(), AF_INET6);
    EXPECT_TRUE(parse_backend_address("localhost:9000"));
    for (const char* bad : {"", "9000", ":9000", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536",
                            "127.0.0.1:90x", "host.example:9000", "[::1]9000", "/run/php.sock"})
        EXPECT_FALSE(parse_backend_address(bad)) << bad;
}

} // namespace
} // namespace lepus::upstream
