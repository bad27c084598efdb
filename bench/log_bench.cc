// AsyncLogger throughput and append() latency, from 1 and 4 threads, logging ~150-byte
// access-log lines to a file under /tmp.
//
//   log_bench --benchmark_min_time=0.2
//
// items_per_second is the lines accepted per second by all threads together; "dropped"
// is the share of them the back-end could not keep up with (the disk, not append(), is the
// limit then). Time per iteration is the mean cost of one append() call.
#include "log/access_log.h"
#include "log/async_logger.h"

#include <algorithm>
#include <benchmark/benchmark.h>
#include <cstdio>
#include <memory>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

std::unique_ptr<AsyncLogger> g_logger;

std::string bench_log_path() {
    return "/tmp/lepus-log-bench-" + std::to_string(::getpid());
}

// Thread 0 sets up before the timed loop and tears down after it; Google Benchmark
// synchronises all threads at the loop's start and end.
void start_logger(const benchmark::State& state) {
    if (state.thread_index() != 0) return;
    const std::string path = bench_log_path();
    ::unlink(path.c_str());
    g_logger = std::make_unique<AsyncLogger>(AsyncLoggerOptions{.path = path});
    std::string error;
    if (!g_logger->start(error)) std::fprintf(stderr, "%s\n", error.c_str());
}

void stop_logger(benchmark::State& state) {
    if (state.thread_index() != 0) return;
    g_logger->stop(); // flushes: included in neither the timing nor the per-call latency
    const double appended = double(g_logger->written_lines() + g_logger->dropped_lines());
    state.counters["dropped%"] =
        appended > 0 ? 100.0 * double(g_logger->dropped_lines()) / appended : 0.0;
    g_logger.reset();
    ::unlink(bench_log_path().c_str());
}

AccessLogEntry sample_entry() {
    return AccessLogEntry{.remote_addr = "192.168.100.23",
                          .time = ::time(nullptr),
                          .method = "GET",
                          .target = "/static/img/logo.png?v=2",
                          .protocol = "HTTP/1.1",
                          .status = 200,
                          .bytes_sent = 48213,
                          .referer = "https://example.com/",
                          .user_agent = "Mozilla/5.0 (X11; Linux x86_64)"};
}

// append() of a pre-formatted ~150-byte line: the logger's own cost.
void BM_Append(benchmark::State& state) {
    start_logger(state);
    std::string line;
    append_combined_line(sample_entry(), line);
    uint64_t count = 0;
    for (auto _ : state) {
        g_logger->append(line);
        ++count;
    }
    state.SetItemsProcessed(int64_t(count));
    state.SetBytesProcessed(int64_t(count * line.size()));
    state.counters["line_bytes"] =
        benchmark::Counter(double(line.size()), benchmark::Counter::kAvgThreads);
    stop_logger(state);
}
BENCHMARK(BM_Append)->Threads(1)->Threads(4)->UseRealTime();

// What a reactor pays per request: format the combined line, then append it.
void BM_FormatAndAppend(benchmark::State& state) {
    start_logger(state);
    AccessLogEntry entry = sample_entry();
    std::string line;
    uint64_t count = 0;
    for (auto _ : state) {
        line.clear();
        append_combined_line(entry, line);
        g_logger->append(line);
        ++count;
    }
    state.SetItemsProcessed(int64_t(count));
    stop_logger(state);
}
BENCHMARK(BM_FormatAndAppend)->Threads(1)->Threads(4)->UseRealTime();

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// The distribution of single append() calls: the tail shows buffer swaps, lock contention
// and first-touch page faults that a mean hides. The two clock reads (~20-40 ns) are
// included in every sample.
void BM_AppendLatency(benchmark::State& state) {
    start_logger(state);
    std::string line;
    append_combined_line(sample_entry(), line);
    std::vector<uint32_t> samples;
    samples.reserve(1u << 22);
    for (auto _ : state) {
        const uint64_t begin = now_ns();
        g_logger->append(line);
        const uint64_t elapsed = now_ns() - begin;
        if (samples.size() < samples.capacity()) samples.push_back(uint32_t(elapsed));
    }
    state.SetItemsProcessed(int64_t(state.iterations()));
    std::sort(samples.begin(), samples.end());
    auto percentile = [&](double p) {
        return samples.empty() ? 0.0 : double(samples[size_t(p * double(samples.size() - 1))]);
    };
    // Averaged over threads: each thread reports its own distribution.
    state.counters["p50_ns"] =
        benchmark::Counter(percentile(0.50), benchmark::Counter::kAvgThreads);
    state.counters["p99_ns"] =
        benchmark::Counter(percentile(0.99), benchmark::Counter::kAvgThreads);
    state.counters["p999_ns"] =
        benchmark::Counter(percentile(0.999), benchmark::Counter::kAvgThreads);
    state.counters["max_ns"] = benchmark::Counter(percentile(1.0), benchmark::Counter::kAvgThreads);
    stop_logger(state);
}
BENCHMARK(BM_AppendLatency)->Threads(1)->Threads(4)->UseRealTime();

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
