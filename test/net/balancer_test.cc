#include "net/balancer.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace lepus {
namespace {

// Plays the reactors' side on synthetic loads: takes handed-over connections
// (live first, then accepted_total, as the header requires), closes some and
// serves requests.
struct FakeReactors {
    explicit FakeReactors(size_t count) : loads(count), live(count, 0) {}

    void take(size_t i, uint64_t connections = 1) {
        live[i] += connections;
        loads[i].live_connections.store(uint32_t(live[i]), std::memory_order_relaxed);
        loads[i].accepted_total.fetch_add(connections, std::memory_order_release);
    }
    void close(size_t i, uint64_t connections) {
        live[i] -= std::min(live[i], connections);
        loads[i].live_connections.store(uint32_t(live[i]), std::memory_order_relaxed);
    }
    void serve(size_t i, uint64_t requests) {
        loads[i].requests_total.fetch_add(requests, std::memory_order_relaxed);
    }

    std::vector<ReactorLoad> loads;
    std::vector<uint64_t> live;
};

TEST(Balancer, EqualLoadsSpreadEvenly) {
    FakeReactors reactors(4);
    Balancer balancer(reactors.loads);
    std::mt19937 random(7);
    std::vector<int> picks(4, 0);
    uint64_t now = 1000;
    for (int n = 0; n < 10000; ++n) {
        const size_t i = balancer.pick(now);
        ++picks[i];
        reactors.take(i);
        // Every reactor serves the same traffic; connections close at random.
        if (n % 10 == 0) {
            for (size_t r = 0; r < 4; ++r) {
                reactors.serve(r, 50);
                reactors.close(r, random() % 6);
            }
            now += 10;
        }
    }
    for (int count : picks) {
        EXPECT_GE(count, 2000);
        EXPECT_LE(count, 3000);
    }
}

TEST(Balancer, BurstBeforeAnyReactorRunsSpreadsEvenly) {
    FakeReactors reactors(4);
    Balancer balancer(reactors.loads);
    std::vector<int> picks(4, 0);
    for (int n = 0; n < 1000; ++n)
        ++picks[balancer.pick(5000)]; // counters never updated
    for (int count : picks)
        EXPECT_EQ(count, 250);
    for (size_t i = 0; i < 4; ++i)
        EXPECT_EQ(balancer.in_flight(i), 250u);
}

TEST(Balancer, BurstOnUnevenReactorsFillsTheLightOnesFirst) {
    FakeReactors reactors(3);
    reactors.take(0, 40);
    reactors.take(1, 10);
    Balancer balancer(reactors.loads);
    std::vector<int> picks(3, 0);
    for (int n = 0; n < 60; ++n)
        ++picks[balancer.pick(0)];
    // Reactor 2 catches up with 1 (10 picks), then they share the rest (25 each)
    // and stay below reactor 0's 40.
    EXPECT_EQ(picks[0], 0);
    EXPECT_EQ(picks[1], 25);
    EXPECT_EQ(picks[2], 35);
}

TEST(Balancer, ConnectionTakenFromRingIsNotCountedTwice) {
    FakeReactors reactors(2);
    Balancer balancer(reactors.loads);
    const size_t first = balancer.pick(0);
    EXPECT_EQ(balancer.in_flight(first), 1u);
    reactors.take(first);
    EXPECT_EQ(balancer.in_flight(first), 0u);
    // live 1 vs 0: the other reactor is next, then they alternate.
    EXPECT_NE(balancer.pick(0), first);
}

TEST(Balancer, ReactorWithManyMoreLiveConnectionsGetsFewer) {
    FakeReactors reactors(4);
    reactors.take(0, 500);
    reactors.take(1, 100);
    Balancer balancer(reactors.loads);
    std::vector<int> picks(4, 0);
    for (int n = 0; n < 600; ++n) {
        const size_t i = balancer.pick(1000 + uint64_t(n));
        ++picks[i];
        reactors.take(i);
    }
    EXPECT_EQ(picks[0], 0);
    EXPECT_LT(picks[1], picks[2]);
    EXPECT_LT(picks[1], picks[3]);
    EXPECT_EQ(picks[0] + picks[1] + picks[2] + picks[3], 600);
}

TEST(Balancer, ReactorWithMuchHigherThroughputGetsFewer) {
    FakeReactors reactors(4);
    for (size_t i = 0; i < 4; ++i)
        reactors.take(i, 100);
    Balancer balancer(reactors.loads);
    std::vector<int> picks(4, 0);
    uint64_t now = 0;
    for (int n = 0; n < 2000; ++n) {
        if (n % 20 == 0) {
            // Reactor 0 serves ten times the requests of each other reactor.
            reactors.serve(0, 1000);
            for (size_t i = 1; i < 4; ++i)
                reactors.serve(i, 100);
            now += 50;
        }
        const size_t i = balancer.pick(now);
        ++picks[i];
        reactors.take(i);
    }
    EXPECT_GT(balancer.rate(0), 5 * balancer.rate(1));
    for (size_t i = 1; i < 4; ++i)
        EXPECT_LT(picks[0] * 2, picks[i]) << "reactor " << i;
}

TEST(Balancer, ZeroWeightIgnoresThroughput) {
    FakeReactors reactors(2);
    Balancer balancer(reactors.loads, {.throughput_weight = 0});
    std::vector<int> picks(2, 0);
    uint64_t now = 0;
    for (int n = 0; n < 1000; ++n) {
        reactors.serve(0, 1000);
        now += 10;
        const size_t i = balancer.pick(now);
        ++picks[i];
        reactors.take(i);
    }
    EXPECT_EQ(picks[0], 500);
    EXPECT_EQ(picks[1], 500);
}

TEST(Balancer, RateIsSmoothedRequestsPerSecond) {
    FakeReactors reactors(2);
    Balancer balancer(reactors.loads, {.interval_ms = 100, .smoothing = 0.5});
    balancer.pick(0); // baseline
    reactors.serve(0, 100);
    balancer.pick(100);
    EXPECT_DOUBLE_EQ(balancer.rate(0), 500.0); // half of 1000/s
    EXPECT_DOUBLE_EQ(balancer.rate(1), 0.0);
    reactors.serve(0, 100);
    balancer.pick(150); // before the interval ends: no new sample
    EXPECT_DOUBLE_EQ(balancer.rate(0), 500.0);
    balancer.pick(200);
    EXPECT_DOUBLE_EQ(balancer.rate(0), 750.0);
}

TEST(Balancer, ReassignAndUnpickKeepInFlightExact) {
    FakeReactors reactors(3);
    Balancer balancer(reactors.loads);
    const size_t first = balancer.pick(0);
    const size_t other = (first + 1) % 3;
    balancer.reassign(first, other); // first's ring was full
    EXPECT_EQ(balancer.in_flight(first), 0u);
    EXPECT_EQ(balancer.in_flight(other), 1u);
    balancer.unpick(other); // nobody could take it
    EXPECT_EQ(balancer.in_flight(other), 0u);
}

TEST(Balancer, SingleReactorAlwaysPicked) {
    FakeReactors reactors(1);
    Balancer balancer(reactors.loads);
    for (int n = 0; n < 10; ++n)
        EXPECT_EQ(balancer.pick(uint64_t(n)), 0u);
    EXPECT_EQ(balancer.in_flight(0), 10u);
}

} // namespace
} // namespace lepus
