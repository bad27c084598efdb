// Cost of choosing a reactor per accepted connection.
#include "net/balancer.h"

#include <benchmark/benchmark.h>
#include <vector>

namespace lepus {
namespace {

void BM_BalancerPick(benchmark::State& state) {
    std::vector<ReactorLoad> loads(size_t(state.range(0)));
    for (size_t i = 0; i < loads.size(); ++i) {
        loads[i].live_connections.store(uint32_t(100 + i * 7));
        loads[i].requests_total.store(1000 * i);
    }
    Balancer balancer(loads);
    uint64_t now = 0, n = 0;
    for (auto _ : state) {
        const size_t i = balancer.pick(now);
        // Reactors take the connection and serve requests now and then.
        loads[i].live_connections.fetch_add(1, std::memory_order_relaxed);
        loads[i].accepted_total.fetch_add(1, std::memory_order_release);
        if ((++n & 63) == 0) {
            loads[n % loads.size()].requests_total.fetch_add(100, std::memory_order_relaxed);
            now += 1; // 1 ms per 64 picks: rates re-sampled every 6,400 picks
        }
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BalancerPick)->Arg(2)->Arg(4)->Arg(16)->Arg(64);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
