#include "net/spsc_ring.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <thread>

namespace lepus {
namespace {

TEST(SpscRing, CapacityRoundsUpToPowerOfTwo) {
    EXPECT_EQ(SpscRing<int>(0).capacity(), 1u);
    EXPECT_EQ(SpscRing<int>(1).capacity(), 1u);
    EXPECT_EQ(SpscRing<int>(3).capacity(), 4u);
    EXPECT_EQ(SpscRing<int>(4).capacity(), 4u);
    EXPECT_EQ(SpscRing<int>(1000).capacity(), 1024u);
}

TEST(SpscRing, EmptyRingPopsNothing) {
    SpscRing<int> ring(8);
    int out = -1;
    EXPECT_TRUE(ring.empty_approx());
    EXPECT_EQ(ring.size_approx(), 0u);
    EXPECT_FALSE(ring.try_pop(out));
    EXPECT_EQ(out, -1);
}

TEST(SpscRing, FullRingRefusesPushUntilPopped) {
    SpscRing<int> ring(4);
    for (int i = 0; i < 4; ++i)
        EXPECT_TRUE(ring.try_push(i));
    EXPECT_EQ(ring.size_approx(), 4u);
    EXPECT_FALSE(ring.try_push(99));
    int out = -1;
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, 0);
    EXPECT_TRUE(ring.try_push(4));
    EXPECT_FALSE(ring.try_push(100));
    for (int expected = 1; expected <= 4; ++expected) {
        ASSERT_TRUE(ring.try_pop(out));
        EXPECT_EQ(out, expected);
    }
    EXPECT_FALSE(ring.try_pop(out));
}

TEST(SpscRing, WrapsAroundManyTimesInFifoOrder) {
    SpscRing<uint64_t> ring(8);
    uint64_t next_in = 0, next_out = 0;
    // Vary the fill level so the indices cross the array end at every offset.
    for (int round = 0; round < 10000; ++round) {
        const int burst = 1 + round % 8;
        for (int i = 0; i < burst; ++i)
            ASSERT_TRUE(ring.try_push(next_in++));
        EXPECT_EQ(ring.size_approx(), size_t(burst));
        for (int i = 0; i < burst; ++i) {
            uint64_t out = 0;
            ASSERT_TRUE(ring.try_pop(out));
            ASSERT_EQ(out, next_out++);
        }
        EXPECT_TRUE(ring.empty_approx());
    }
    EXPECT_EQ(next_out, next_in);
}

TEST(SpscRing, MovesNonTrivialValues) {
    SpscRing<std::string> ring(2);
    ASSERT_TRUE(ring.try_push(std::string(100, 'x')));
    ASSERT_TRUE(ring.try_push("short"));
    std::string out;
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, std::string(100, 'x'));
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, "short");
}

// Producer pushes 1..N, consumer checks it sees exactly that sequence. Under
// ThreadSanitizer this also checks the acquire/release pairs. 200,000 values
// wrap the 64-slot ring over 3,000 times (two million took 29 s of CI's two
// cores beside the other tests, for no more wraps that matter).
TEST(SpscRing, TwoThreadStressKeepsOrderAndLosesNothing) {
    constexpr uint64_t kCount = 200000;
    SpscRing<uint64_t> ring(64);
    std::thread producer([&] {
        for (uint64_t value = 1; value <= kCount; ++value) {
            while (!ring.try_push(value))
                std::this_thread::yield();
        }
    });
    uint64_t expected = 1, sum = 0;
    bool in_order = true;
    while (expected <= kCount) {
        uint64_t value = 0;
        if (!ring.try_pop(value)) {
            std::this_thread::yield();
            continue;
        }
        in_order = in_order && value == expected;
        sum += value;
        ++expected;
        EXPECT_LE(ring.size_approx(), ring.capacity());
    }
    producer.join();
    EXPECT_TRUE(in_order);
    EXPECT_EQ(sum, kCount * (kCount + 1) / 2);
    uint64_t extra = 0;
    EXPECT_FALSE(ring.try_pop(extra));
}

} // namespace
} // namespace lepus
