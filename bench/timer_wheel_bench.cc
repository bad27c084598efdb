// TimerWheel operations with one million live timers, the load of a reactor
// holding a million idle keepalive connections.
#include "net/timer_wheel.h"

#include <benchmark/benchmark.h>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace lepus {
namespace {

constexpr size_t kLiveTimers = 1'000'000;
constexpr uint64_t kStart = 1'700'000'000'000;

void on_timer(TimerEntry&) {}

// A wheel with kLiveTimers entries due within the next 60 s, like keepalive timeouts.
struct Fixture {
    explicit Fixture(size_t count) : wheel(kStart), entries(count), deadlines(1 << 16) {
        std::mt19937_64 random(42);
        for (uint64_t& deadline : deadlines)
            deadline = kStart + 1 + random() % 60000;
        for (size_t i = 0; i < count; ++i) {
            entries[i].set_callback(&on_timer);
            wheel.schedule(entries[i], deadlines[i & (deadlines.size() - 1)]);
        }
    }
    TimerWheel wheel;
    std::vector<TimerEntry> entries;
    std::vector<uint64_t> deadlines;
};

void BM_TimerSchedule(benchmark::State& state) {
    Fixture fixture(kLiveTimers);
    size_t i = 0;
    for (auto _ : state) {
        // A stride that visits the entries in scattered order, as connections do.
        i = (i + 7919) % kLiveTimers;
        fixture.wheel.schedule(fixture.entries[i],
                               fixture.deadlines[(i * 31) & (fixture.deadlines.size() - 1)]);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerSchedule);

// Refresh by a few ms: within the slack, so nothing moves (the per-request case).
void BM_TimerRefreshWithinSlack(benchmark::State& state) {
    Fixture fixture(kLiveTimers);
    size_t i = 0;
    for (auto _ : state) {
        i = (i + 7919) % kLiveTimers;
        TimerEntry& entry = fixture.entries[i];
        fixture.wheel.refresh(entry, entry.deadline() + 5);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerRefreshWithinSlack);

// Refresh by more than the slack: a re-link every time.
void BM_TimerRefreshRelink(benchmark::State& state) {
    Fixture fixture(kLiveTimers);
    size_t i = 0;
    uint64_t shift = 0;
    for (auto _ : state) {
        i = (i + 7919) % kLiveTimers;
        shift = (shift + 1) % 30000;
        fixture.wheel.refresh(fixture.entries[i], kStart + 1000 + shift);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerRefreshRelink);

void BM_TimerCancelAndSchedule(benchmark::State& state) {
    Fixture fixture(kLiveTimers);
    size_t i = 0;
    for (auto _ : state) {
        i = (i + 7919) % kLiveTimers;
        fixture.wheel.cancel(fixture.entries[i]);
        fixture.wheel.schedule(fixture.entries[i], fixture.deadlines[i & 0xffff]);
    }
    state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_TimerCancelAndSchedule);

// Firing: every entry re-armed and run out over 60 s of 1 ms ticks.
void BM_TimerExpireAll(benchmark::State& state) {
    for (auto _ : state) {
        state.PauseTiming();
        auto fixture = std::make_unique<Fixture>(kLiveTimers);
        state.ResumeTiming();
        size_t fired = 0;
        for (uint64_t now = kStart; now <= kStart + 60001; ++now)
            fired += fixture->wheel.expire(now);
        benchmark::DoNotOptimize(fired);
        state.PauseTiming();
        fixture.reset();
        state.ResumeTiming();
    }
    state.SetItemsProcessed(state.iterations() * int64_t(kLiveTimers));
}
BENCHMARK(BM_TimerExpireAll)->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_TimerNextExpiry(benchmark::State& state) {
    Fixture fixture(kLiveTimers);
    for (auto _ : state)
        benchmark::DoNotOptimize(fixture.wheel.next_expiry());
}
BENCHMARK(BM_TimerNextExpiry);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
