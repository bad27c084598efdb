// SpscRing hand-off cost: one thread (the uncontended cost of a push + pop) and
// two threads (acceptor -> reactor throughput with the indices on separate lines).
#include "net/spsc_ring.h"

#include <benchmark/benchmark.h>
#include <cstdint>
#include <thread>

namespace lepus {
namespace {

void BM_RingPushPopSameThread(benchmark::State& state) {
    SpscRing<uint64_t> ring(4096);
    uint64_t value = 0, out = 0;
    for (auto _ : state) {
        ring.try_push(value++);
        ring.try_pop(out);
        benchmark::DoNotOptimize(out);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingPushPopSameThread);

// A producer thread pushes kBatch values while the benchmark thread pops them.
// Both sides spin, yielding now and then so that an oversubscribed machine
// (two cores shared with builds) still makes progress.
void BM_RingTwoThreads(benchmark::State& state) {
    constexpr uint64_t kBatch = 1 << 20;
    SpscRing<uint64_t> ring(size_t(state.range(0)));
    uint64_t checksum = 0;
    for (auto _ : state) {
        std::thread producer([&] {
            for (uint64_t value = 0; value < kBatch; ++value) {
                for (unsigned spins = 1; !ring.try_push(value); ++spins)
                    if (spins % 64 == 0) std::this_thread::yield();
            }
        });
        for (uint64_t popped = 0; popped < kBatch; ++popped) {
            uint64_t out = 0;
            for (unsigned spins = 1; !ring.try_pop(out); ++spins)
                if (spins % 64 == 0) std::this_thread::yield();
            checksum += out;
        }
        producer.join();
    }
    benchmark::DoNotOptimize(checksum);
    state.SetItemsProcessed(int64_t(state.iterations() * kBatch));
}
BENCHMARK(BM_RingTwoThreads)->Arg(64)->Arg(4096)->UseRealTime()->Unit(benchmark::kMillisecond);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
