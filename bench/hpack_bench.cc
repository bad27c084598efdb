// HPACK (src/http/hpack.h) against nghttp2's, ns per header block: decoding a
// browser's request (the first on a connection, every literal Huffman-coded
// and indexed; and a repeat, mostly indices), and encoding a static file's
// response head whose date, content-length, etag and last-modified change from
// response to response. The request blocks are made by nghttp2's encoder, as a
// browser's would be. Figures: docs/BENCHMARKS.md, issue 38, "Own HPACK".
#include "http/hpack.h"

#include <benchmark/benchmark.h>
#include <nghttp2/nghttp2.h>
#include <string>
#include <vector>

namespace lepus {
namespace {

struct NameValue {
    std::string name;
    std::string value;
};

const std::vector<NameValue> kRequest = {
    {":method", "GET"},
    {":authority", "www.example.com"},
    {":scheme", "https"},
    {":path", "/assets/js/app.bundle.js?v=20231010"},
    {"sec-ch-ua", "\"Chromium\";v=\"120\", \"Not?A_Brand\";v=\"24\""},
    {"sec-ch-ua-mobile", "?0"},
    {"user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "Chrome/120.0.0.0 Safari/537.36"},
    {"sec-ch-ua-platform", "\"Linux\""},
    {"accept", "*/*"},
    {"sec-fetch-site", "same-origin"},
    {"sec-fetch-mode", "no-cors"},
    {"sec-fetch-dest", "script"},
    {"referer", "https://www.example.com/"},
    {"accept-encoding", "gzip, deflate, br"},
    {"accept-language", "en-US,en;q=0.9"},
    {"cookie", "session=8f2a1c9e4b7d; theme=dark"},
};

std::vector<nghttp2_nv> to_nva(const std::vector<NameValue>& fields) {
    std::vector<nghttp2_nv> nva;
    for (const NameValue& field : fields)
        nva.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(field.name.data())),
                                 reinterpret_cast<uint8_t*>(const_cast<char*>(field.value.data())),
                                 field.name.size(), field.value.size(), NGHTTP2_NV_FLAG_NONE});
    return nva;
}

// The request twice from one nghttp2 encoder: the first block, then the repeat.
struct RequestBlocks {
    std::vector<uint8_t> first;
    std::vector<uint8_t> repeat;
};

RequestBlocks make_request_blocks() {
    nghttp2_hd_deflater* deflater = nullptr;
    nghttp2_hd_deflate_new(&deflater, 4096);
    std::vector<nghttp2_nv> nva = to_nva(kRequest);
    RequestBlocks blocks;
    for (std::vector<uint8_t>* block : {&blocks.first, &blocks.repeat}) {
        block->resize(nghttp2_hd_deflate_bound(deflater, nva.data(), nva.size()));
        ssize_t size =
            nghttp2_hd_deflate_hd(deflater, block->data(), block->size(), nva.data(), nva.size());
        block->resize(static_cast<size_t>(size));
    }
    nghttp2_hd_deflate_del(deflater);
    // The first block starts with size updates to 0 and back to 4096, so that
    // decoding it again finds the empty table it was made for.
    blocks.first.insert(blocks.first.begin(), {0x20, 0x3f, 0xe1, 0x1f});
    return blocks;
}

const RequestBlocks kBlocks = make_request_blocks();

bool nghttp2_inflate(nghttp2_hd_inflater* inflater, const std::vector<uint8_t>& block,
                     size_t& fields) {
    const uint8_t* at = block.data();
    size_t left = block.size();
    for (;;) {
        nghttp2_nv field;
        int flags = 0;
        ssize_t used = nghttp2_hd_inflate_hd2(inflater, &field, &flags, at, left, 1);
        if (used < 0) return false;
        at += used;
        left -= static_cast<size_t>(used);
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            benchmark::DoNotOptimize(field.value);
            ++fields;
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
    }
    nghttp2_hd_inflate_end_headers(inflater);
    return true;
}

void decode_ours(benchmark::State& state, bool repeat) {
    HpackDecoder decoder;
    HpackHeaderList list;
    if (decoder.decode(kBlocks.first, list) != HpackStatus::Ok) state.SkipWithError("decode");
    const std::vector<uint8_t>& block = repeat ? kBlocks.repeat : kBlocks.first;
    for (auto _ : state) {
        HpackStatus status = decoder.decode(block, list);
        benchmark::DoNotOptimize(status);
        benchmark::DoNotOptimize(list[list.size() - 1].value.data());
    }
    if (list.size() != kRequest.size()) state.SkipWithError("wrong field count");
    state.counters["block_bytes"] = static_cast<double>(block.size());
}

void decode_nghttp2(benchmark::State& state, bool repeat) {
    nghttp2_hd_inflater* inflater = nullptr;
    nghttp2_hd_inflate_new(&inflater);
    size_t fields = 0;
    nghttp2_inflate(inflater, kBlocks.first, fields);
    const std::vector<uint8_t>& block = repeat ? kBlocks.repeat : kBlocks.first;
    for (auto _ : state) {
        fields = 0;
        if (!nghttp2_inflate(inflater, block, fields)) state.SkipWithError("inflate");
    }
    if (fields != kRequest.size()) state.SkipWithError("wrong field count");
    nghttp2_hd_inflate_del(inflater);
    state.counters["block_bytes"] = static_cast<double>(block.size());
}

void BM_DecodeFirstRequest_Lepus(benchmark::State& state) {
    decode_ours(state, false);
}
void BM_DecodeFirstRequest_Nghttp2(benchmark::State& state) {
    decode_nghttp2(state, false);
}
void BM_DecodeRepeatRequest_Lepus(benchmark::State& state) {
    decode_ours(state, true);
}
void BM_DecodeRepeatRequest_Nghttp2(benchmark::State& state) {
    decode_nghttp2(state, true);
}
BENCHMARK(BM_DecodeFirstRequest_Lepus);
BENCHMARK(BM_DecodeFirstRequest_Nghttp2);
BENCHMARK(BM_DecodeRepeatRequest_Lepus);
BENCHMARK(BM_DecodeRepeatRequest_Nghttp2);

// A static file's response head, as lepus sends one: 9 fields, 4 of them new
// every response. 64 variants are cycled so no encoder can index its way out.
struct Response {
    std::vector<NameValue> fields;
};

std::vector<Response> make_responses() {
    std::vector<Response> responses;
    for (int i = 0; i < 64; ++i) {
        const std::string n = std::to_string(i);
        responses.push_back(Response{{
            {":status", "200"},
            {"server", "lepus"},
            {"date",
             "Fri, 27 Nov 2026 21:" + std::to_string(10 + i % 50) + ":0" + n.substr(0, 1) + " GMT"},
            {"content-type", "text/html"},
            {"content-length", std::to_string(612 + 37 * i)},
            {"last-modified",
             "Thu, 26 Nov 2026 1" + n.substr(0, 1) + ":20:3" + n.substr(n.size() - 1) + " GMT"},
            {"etag", "\"6924f6b" + n + "-" + std::to_string(264 + i) + "\""},
            {"accept-ranges", "bytes"},
            {"vary", "accept-encoding"},
        }});
    }
    return responses;
}

const std::vector<Response> kResponses = make_responses();

void encode_ours(benchmark::State& state, bool huffman_for_literals) {
    HpackEncoder encoder;
    encoder.set_huffman_for_literals(huffman_for_literals);
    std::string block;
    size_t i = 0;
    size_t bytes = 0;
    for (auto _ : state) {
        const Response& response = kResponses[i++ & 63];
        block.clear();
        encoder.begin_block(block);
        encoder.encode_status(200, block);
        const auto& f = response.fields;
        encoder.encode(f[1].name, f[1].value, HpackIndexing::Incremental, block);
        encoder.encode(f[2].name, f[2].value, HpackIndexing::WithoutIndexing, block);
        encoder.encode(f[3].name, f[3].value, HpackIndexing::Incremental, block);
        encoder.encode(f[4].name, f[4].value, HpackIndexing::WithoutIndexing, block);
        encoder.encode(f[5].name, f[5].value, HpackIndexing::WithoutIndexing, block);
        encoder.encode(f[6].name, f[6].value, HpackIndexing::WithoutIndexing, block);
        encoder.encode(f[7].name, f[7].value, HpackIndexing::Incremental, block);
        encoder.encode(f[8].name, f[8].value, HpackIndexing::Incremental, block);
        benchmark::DoNotOptimize(block.data());
        bytes += block.size();
    }
    state.counters["block_bytes"] =
        static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

void BM_EncodeResponse_Lepus(benchmark::State& state) {
    encode_ours(state, false);
}
void BM_EncodeResponse_LepusHuffman(benchmark::State& state) {
    encode_ours(state, true);
}
BENCHMARK(BM_EncodeResponse_Lepus);
BENCHMARK(BM_EncodeResponse_LepusHuffman);

void BM_EncodeResponse_Nghttp2(benchmark::State& state) {
    nghttp2_hd_deflater* deflater = nullptr;
    nghttp2_hd_deflate_new(&deflater, 4096);
    std::vector<std::vector<nghttp2_nv>> nvas;
    for (const Response& response : kResponses)
        nvas.push_back(to_nva(response.fields));
    std::vector<uint8_t> block(4096);
    size_t i = 0;
    size_t bytes = 0;
    for (auto _ : state) {
        const std::vector<nghttp2_nv>& nva = nvas[i++ & 63];
        ssize_t size =
            nghttp2_hd_deflate_hd(deflater, block.data(), block.size(), nva.data(), nva.size());
        benchmark::DoNotOptimize(block.data());
        bytes += static_cast<size_t>(size);
    }
    nghttp2_hd_deflate_del(deflater);
    state.counters["block_bytes"] =
        static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}
BENCHMARK(BM_EncodeResponse_Nghttp2);

} // namespace
} // namespace lepus

BENCHMARK_MAIN();
