// Cost of StaticHandler::handle on the hot paths (cache hit, 304, 404, redirect),
// without sockets. Proposed as bench/static_handler_bench.cc.
#include "http/path.h"
#include "http/range.h"
#include "http/static_handler.h"

#include <benchmark/benchmark.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace lepus {
namespace {

struct Root {
    Root() {
        char pattern[] = "/tmp/lepus-bench-XXXXXX";
        path = mkdtemp(pattern);
        std::filesystem::create_directories(path + "/assets/css");
        std::ofstream(path + "/index.html") << std::string(1024, 'x');
        std::ofstream(path + "/assets/css/site.css") << std::string(4096, 'c');
        std::ofstream(path + "/big.bin") << std::string(1 << 20, 'b');
        options.root = path;
    }
    ~Root() { std::filesystem::remove_all(path); }
    std::string path;
    StaticOptions options;
};

void run(benchmark::State& state, std::string_view path, std::string_view if_none_match = {}) {
    Root root;
    std::string error;
    auto handler = StaticHandler::create(root.options, error);
    Request request;
    request.path = path;
    request.if_none_match = if_none_match;
    Response out;
    std::string head; // the head as the HTTP/1.1 engine writes it, as part of the cost
    uint64_t now_ms = 1;
    for (auto _ : state) {
        handler->handle(request, true, now_ms, out); // within revalidation interval
        write_http1_head(out.head, 1700000000, true, 1, head);
        benchmark::DoNotOptimize(head.data());
    }
    state.counters["status"] = out.head.status;
}

void BM_HitSmallFile(benchmark::State& state) {
    run(state, "/assets/css/site.css");
}
void BM_HitIndex(benchmark::State& state) {
    run(state, "/");
}
void BM_HitBigFile(benchmark::State& state) {
    run(state, "/big.bin");
}
void BM_NotModified(benchmark::State& state) {
    Root root;
    std::string error;
    auto handler = StaticHandler::create(root.options, error);
    Request request;
    request.path = "/index.html";
    Response out;
    handler->handle(request, true, 1, out);
    std::string etag(out.head.get("ETag").value_or(""));
    request.if_none_match = etag;
    std::string head;
    for (auto _ : state) {
        handler->handle(request, true, 1, out);
        write_http1_head(out.head, 1700000000, true, 1, head);
        benchmark::DoNotOptimize(head.data());
    }
    state.counters["status"] = out.head.status;
}
void BM_NotFound(benchmark::State& state) {
    run(state, "/missing.html");
}
void BM_Redirect(benchmark::State& state) {
    run(state, "/assets");
}

void BM_DecodePath(benchmark::State& state) {
    std::string out;
    for (auto _ : state) {
        decode_path("/assets//css/./site%20v2/../site.css", out);
        benchmark::DoNotOptimize(out.data());
    }
}

void BM_ParseRange(benchmark::State& state) {
    RangeSet range;
    for (auto _ : state)
        benchmark::DoNotOptimize(parse_range("bytes=1000-1999", 1 << 20, range));
}

BENCHMARK(BM_HitSmallFile);
BENCHMARK(BM_HitIndex);
BENCHMARK(BM_HitBigFile);
BENCHMARK(BM_NotModified);
BENCHMARK(BM_NotFound);
BENCHMARK(BM_Redirect);
BENCHMARK(BM_DecodePath);
BENCHMARK(BM_ParseRange);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
