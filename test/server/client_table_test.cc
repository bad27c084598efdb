#include "server/client_table.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace lepus {
namespace {

SocketAddress ipv4(uint32_t host_order) {
    SocketAddress address;
    address.storage.v4.sin_family = AF_INET;
    address.storage.v4.sin_addr.s_addr = htonl(host_order);
    address.length = sizeof(sockaddr_in);
    return address;
}

constexpr uint64_t kPerMinute10 = 10 * 1000 / 60; // "10r/m"

TEST(ClientTable, TheFirstRequestAndTheBurstPassThenRefusals) {
    ClientTable table(1 << 20);
    auto key = ClientTable::key_of(ipv4(0x0a000001), 7);
    for (int i = 0; i < 6; ++i)
        EXPECT_TRUE(table.take_request(key, kPerMinute10, 5, true, 1000).pass) << i;
    ClientTable::RateVerdict refused = table.take_request(key, kPerMinute10, 5, true, 1000);
    EXPECT_FALSE(refused.pass);
    EXPECT_TRUE(refused.log);
    // 1000 over the burst drains in 1000 / 166 per second: about six seconds.
    EXPECT_GE(refused.retry_after_ms, 6000u);
    EXPECT_LE(refused.retry_after_ms, 6100u);
    // Logged once per interval, not per refusal.
    EXPECT_FALSE(table.take_request(key, kPerMinute10, 5, true, 2000).log);
    // A minute later the bucket has leaked ten requests.
    EXPECT_TRUE(table.take_request(key, kPerMinute10, 5, true, 1000 + 60000).pass);
    // Another address, and the same address in another zone, have their own buckets.
    EXPECT_TRUE(
        table.take_request(ClientTable::key_of(ipv4(0x0a000002), 7), kPerMinute10, 5, true, 2000)
            .pass);
    EXPECT_TRUE(
        table.take_request(ClientTable::key_of(ipv4(0x0a000001), 8), kPerMinute10, 5, true, 2000)
            .pass);
}

TEST(ClientTable, TheBucketLeaksAtTheRate) {
    ClientTable table(1 << 20);
    auto key = ClientTable::key_of(ipv4(0x0a000003), 1);
    EXPECT_TRUE(table.take_request(key, 2000, 0, true, 10000).pass); // 2r/s, no burst
    EXPECT_FALSE(table.take_request(key, 2000, 0, true, 10100).pass);
    EXPECT_TRUE(table.take_request(key, 2000, 0, true, 10500).pass);
}

TEST(ClientTable, WithoutNodelayTheBurstIsDelayedByTheExcess) {
    ClientTable table(1 << 20);
    auto key = ClientTable::key_of(ipv4(0x0a000004), 1);
    EXPECT_EQ(table.take_request(key, 2000, 3, false, 5000).delay_ms, 0u);
    EXPECT_EQ(table.take_request(key, 2000, 3, false, 5000).delay_ms, 500u);
    EXPECT_EQ(table.take_request(key, 2000, 3, false, 5000).delay_ms, 1000u);
    EXPECT_EQ(table.take_request(key, 2000, 3, false, 5000).delay_ms, 1500u);
    EXPECT_FALSE(table.take_request(key, 2000, 3, false, 5000).pass);
}

TEST(ClientTable, SlotsAreCountedPerKeyAndGivenBack) {
    ClientTable table(1 << 20);
    auto one = ClientTable::key_of(ipv4(0x0a000005), 1);
    auto other = ClientTable::key_of(ipv4(0x0a000006), 1);
    for (int i = 0; i < 10; ++i)
        EXPECT_TRUE(table.acquire(one, 10));
    bool log = false;
    EXPECT_FALSE(table.acquire(one, 10, 5000, &log));
    EXPECT_TRUE(log); // the first refusal of the interval
    EXPECT_FALSE(table.acquire(one, 10, 6000, &log));
    EXPECT_FALSE(log);
    EXPECT_TRUE(table.acquire(other, 10));
    table.release(one);
    EXPECT_TRUE(table.acquire(one, 10));
    {
        ClientSlot slot; // holds one of the ten: gives it back when it goes
        slot.hold(table, one);
        EXPECT_TRUE(slot.held());
    }
    EXPECT_TRUE(table.acquire(one, 10));
    EXPECT_FALSE(table.acquire(one, 10));
}

TEST(ClientTable, AMillionAddressesStayWithinTheBudget) {
    const uint64_t budget = 256 << 10;
    ClientTable table(budget);
    EXPECT_LE(table.capacity() * ClientTable::kEntryBytes, budget);
    auto busy = ClientTable::key_of(ipv4(0x0b000001), 1);
    ASSERT_TRUE(table.acquire(busy, 100));
    for (uint32_t i = 0; i < 1000000; ++i)
        table.take_request(ClientTable::key_of(ipv4(0x20000000 + i), 2), kPerMinute10, 5, true, i);
    EXPECT_LE(table.size(), table.capacity());
    EXPECT_GE(table.evictions(), 1000000 - table.capacity());
    // The entry with a request in progress was kept: its count is still there.
    for (int i = 1; i < 100; ++i)
        ASSERT_TRUE(table.acquire(busy, 100)) << i;
    EXPECT_FALSE(table.acquire(busy, 100));
}

TEST(ClientTable, Ipv4AndMappedIpv6AreOneClient) {
    SocketAddress mapped;
    mapped.storage.v6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:10.0.0.9", &mapped.storage.v6.sin6_addr);
    mapped.length = sizeof(sockaddr_in6);
    auto a = ClientTable::key_of(ipv4(0x0a000009), 3);
    auto b = ClientTable::key_of(mapped, 3);
    EXPECT_EQ(a.address, b.address);
}

} // namespace
} // namespace lepus
