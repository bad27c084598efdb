// RequestParser throughput: one Chrome-like GET of about 450 bytes (ns per request) and a pipelined
// stream of them (bytes per second), both from memory, no sockets.
#include "http/chunked_decoder.h"
#include "http/request_parser.h"

#include <benchmark/benchmark.h>
#include <string>

namespace lepus {
namespace {

const std::string kBrowserGet =
    "GET /assets/js/app.bundle.js?v=20231010 HTTP/1.1\r\n"
    "Host: www.example.com\r\n"
    "Connection: keep-alive\r\n"
    "sec-ch-ua: \"Chromium\";v=\"120\", \"Not?A_Brand\";v=\"24\"\r\n"
    "sec-ch-ua-mobile: ?0\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36\r\n"
    "Accept: */*\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-Mode: no-cors\r\n"
    "Referer: https://www.example.com/\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "\r\n";

void BM_ParseBrowserGet(benchmark::State& state) {
    RequestParser parser;
    for (auto _ : state) {
        parser.reset();
        ParseStatus status = parser.parse(kBrowserGet);
        benchmark::DoNotOptimize(status);
        benchmark::DoNotOptimize(parser.request().user_agent.data());
    }
    if (parser.parse(kBrowserGet) != ParseStatus::Done) state.SkipWithError("parse failed");
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBrowserGet.size()));
    state.counters["request_bytes"] = static_cast<double>(kBrowserGet.size());
}
BENCHMARK(BM_ParseBrowserGet);

// 256 requests back to back, as a client pipelining them would fill the buffer.
void BM_ParsePipelined(benchmark::State& state) {
    std::string stream;
    for (int i = 0; i < 256; ++i)
        stream += kBrowserGet;
    RequestParser parser;
    for (auto _ : state) {
        std::string_view rest = stream;
        while (!rest.empty()) {
            parser.reset();
            if (parser.parse(rest) != ParseStatus::Done) {
                state.SkipWithError("parse failed");
                return;
            }
            rest.remove_prefix(parser.head_size());
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 256));
}
BENCHMARK(BM_ParsePipelined);

// The same request arriving in 64-byte reads: the cost of resuming.
void BM_ParseBrowserGetIn64ByteReads(benchmark::State& state) {
    RequestParser parser;
    for (auto _ : state) {
        parser.reset();
        ParseStatus status = ParseStatus::Again;
        for (size_t n = 64; status == ParseStatus::Again; n += 64)
            status = parser.parse(std::string_view(kBrowserGet).substr(0, n));
        benchmark::DoNotOptimize(status);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBrowserGet.size()));
}
BENCHMARK(BM_ParseBrowserGetIn64ByteReads);

// A 1 MiB body in 16 KiB chunks.
void BM_ChunkedDecode(benchmark::State& state) {
    std::string input;
    std::string chunk(16384, 'x');
    for (int i = 0; i < 64; ++i)
        input += "4000\r\n" + chunk + "\r\n";
    input += "0\r\n\r\n";
    ChunkedDecoder decoder;
    std::string out;
    out.reserve(1 << 20);
    for (auto _ : state) {
        decoder.reset();
        out.clear();
        size_t consumed = 0;
        if (decoder.feed(input, consumed, out) != ChunkedDecoder::Status::Done) {
            state.SkipWithError("decode failed");
            return;
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
}
BENCHMARK(BM_ChunkedDecode);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
