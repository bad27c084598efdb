// FastCGI encoding and decoding costs per request: the PARAMS block of a typical
// request (nginx's fastcgi.conf variables + 10 HTTP_* headers), the records of
// a typical response, and its CGI header block.
#include "fastcgi/cgi_params.h"
#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"

#include <benchmark/benchmark.h>
#include <string>
#include <vector>

using namespace lepus;
using namespace lepus::fastcgi;

namespace {

const std::vector<Header> kHeaders = {
    {"Host", "www.example.com"},
    {"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"},
    {"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
    {"Accept-Language", "en-US,en;q=0.5"},
    {"Accept-Encoding", "gzip, deflate, br"},
    {"Referer", "https://www.example.com/blog/"},
    {"Connection", "keep-alive"},
    {"Cookie", "PHPSESSID=3f2a9c1e8b7d6a5f4e3d2c1b0a998877; theme=dark"},
    {"Upgrade-Insecure-Requests", "1"},
    {"Cache-Control", "max-age=0"},
};

void BM_EncodeParams(benchmark::State& state) {
    Request request;
    request.method_text = "GET";
    request.target = "/index.php/blog/2024/hello-world?page=2&sort=date";
    request.path = "/index.php/blog/2024/hello-world";
    request.query = "page=2&sort=date";
    request.host = "www.example.com";
    request.headers = kHeaders;
    CgiContext context{.request = request,
                       .document_root = "/var/www/html",
                       .script_name = "/index.php",
                       .path_info = "/blog/2024/hello-world",
                       .script_filename = "/var/www/html/index.php",
                       .remote = *parse_listen_address("203.0.113.9:51514"),
                       .local = *parse_listen_address("10.0.0.2:80"),
                       .server_name = "www.example.com",
                       .content_length = std::nullopt};
    std::string out;
    ParamsWriter writer;
    for (auto _ : state) {
        out.clear();
        append_begin_request(out, 1, Role::Responder, true);
        writer.begin(out, 1);
        append_cgi_params(writer, context);
        writer.finish();
        append_stream_end(out, RecordType::Stdin, 1);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_EncodeParams);

std::string typical_response() {
    std::string stdout_bytes =
        "X-Powered-By: PHP/8.2\r\nContent-Type: text/html; charset=UTF-8\r\n"
        "Set-Cookie: PHPSESSID=abc; path=/\r\nCache-Control: no-store\r\n\r\n";
    stdout_bytes.append(8000, 'x');
    std::string out;
    append_stream(out, RecordType::Stdout, 1, stdout_bytes);
    append_stream_end(out, RecordType::Stdout, 1);
    append_end_request(out, 1, {});
    return out;
}

void BM_DecodeResponse(benchmark::State& state) {
    std::string wire = typical_response();
    RecordDecoder decoder;
    CgiResponseParser cgi;
    for (auto _ : state) {
        decoder.reset();
        cgi.reset();
        std::span<const char> data(wire);
        size_t body = 0;
        while (!data.empty()) {
            size_t consumed = 0;
            if (decoder.feed(data, consumed) != DecodeStatus::Done) break;
            data = data.subspan(consumed);
            std::span<const char> content = decoder.record().content;
            if (decoder.record().type == RecordType::Stdout && !content.empty()) {
                size_t used = 0;
                if (cgi.feed(content, used) == CgiParseStatus::Done) body += content.size() - used;
            }
        }
        benchmark::DoNotOptimize(body);
    }
}
BENCHMARK(BM_DecodeResponse);

} // namespace

BENCHMARK_MAIN();
