// libFuzzer driver for RequestParser (src/http/request_parser.h).
//
// The payload is treated as what one connection receives: pipelined requests,
// Content-Length bodies skipped as the server does, delivered in the pieces
// FuzzInput chooses. Each parse() gets a fresh copy of the bytes so far, because
// the connection buffer may move between calls (ASan then catches any pointer the
// parser kept). Checked: Done -> head_size() <= the bytes given, the head ends in
// LF, every view of the Request lies inside the buffer, never both framings;
// Error -> a status in {400, 414, 431, 501, 505}, and sticky; and the transcript
// of outcomes (every request parsed, then where it failed or stopped) is the same
// whichever way the payload was split.
#include "fuzz_input.h"
#include "http/request_parser.h"

#include <string>
#include <vector>

namespace {

using lepus::ParserLimits;
using lepus::ParseStatus;
using lepus::Request;
using lepus::RequestParser;
using lepus::fuzz::lies_inside;

constexpr size_t kMaxRequests = 64; // per input: bounds the time spent on "\n\n\n..."

void append_view(std::string& transcript, std::string_view view) {
    transcript += std::to_string(view.size());
    transcript += ':';
    transcript += view;
    transcript += '|';
}

// Checks a Done request against the buffer it was parsed from and describes it.
void check_and_describe(const RequestParser& parser, std::span<const char> buffer,
                        const ParserLimits& limits, std::string& transcript) {
    const Request& r = parser.request();
    LEPUS_FUZZ_CHECK(parser.head_size() > 0 && parser.head_size() <= buffer.size());
    LEPUS_FUZZ_CHECK(buffer[parser.head_size() - 1] == '\n');
    std::span<const char> head = buffer.first(parser.head_size());
    // An absolute-form target without a path ("http://a?q") has the path "/", a literal.
    LEPUS_FUZZ_CHECK(lies_inside(r.path, head) || r.path == "/");
    for (std::string_view view :
         {r.method_text, r.target, r.query, r.host, r.if_none_match, r.if_modified_since,
          r.if_match, r.if_unmodified_since, r.range, r.if_range, r.accept_encoding, r.referer,
          r.user_agent, r.content_type})
        LEPUS_FUZZ_CHECK(lies_inside(view, head));
    LEPUS_FUZZ_CHECK(!r.method_text.empty() && !r.target.empty());
    LEPUS_FUZZ_CHECK(r.headers.size() <= limits.max_headers);
    LEPUS_FUZZ_CHECK(!(r.chunked && r.content_length));
    LEPUS_FUZZ_CHECK(r.version_minor == 0 || r.version_minor == 1);
    // One of the nine by its name, or an extension method (any other token).
    LEPUS_FUZZ_CHECK(r.method == lepus::Method::Extension
                         ? lepus::method_name(r.method).empty() &&
                               lepus::method_from_name(r.method_text) == lepus::Method::Extension
                         : r.method_text == lepus::method_name(r.method));

    transcript += "D";
    transcript += std::to_string(parser.head_size());
    transcript += ' ';
    // An absolute-form target without a path ("http://a?q") has the path "/", a literal.
    LEPUS_FUZZ_CHECK(lies_inside(r.path, head) || r.path == "/");
    for (std::string_view view :
         {r.method_text, r.target, r.query, r.host, r.range, r.if_none_match, r.user_agent})
        append_view(transcript, view);
    for (const lepus::Header& header : r.headers) {
        LEPUS_FUZZ_CHECK(lies_inside(header.name, head) && lies_inside(header.value, head));
        LEPUS_FUZZ_CHECK(!header.name.empty());
        append_view(transcript, header.name);
        append_view(transcript, header.value);
    }
    transcript += r.content_length ? std::to_string(*r.content_length) : "-";
    transcript += r.chunked ? 'c' : '-';
    transcript += r.keep_alive ? 'k' : '-';
    transcript += r.expect_continue ? 'e' : '-';
    transcript += r.version_minor == 1 ? "1\n" : "0\n";
}

// Parses `payload` as one connection's input arriving in pieces ending at `cuts`.
std::string run(std::span<const char> payload, const std::vector<size_t>& cuts,
                const ParserLimits& limits) {
    RequestParser parser(limits);
    std::string transcript;
    size_t start = 0; // first byte of the current request
    size_t requests = 0;
    for (size_t received : cuts) {
        while (start <= received && requests < kMaxRequests) {
            // A fresh allocation per call: the parser may keep offsets, never pointers.
            std::vector<char> copy(payload.begin() + start, payload.begin() + received);
            std::span<const char> buffer(copy.data(), copy.size());
            ParseStatus status = parser.parse(buffer);
            if (status == ParseStatus::Again) break;
            if (status == ParseStatus::Error) {
                int code = parser.error_status();
                LEPUS_FUZZ_CHECK(code == 400 || code == 414 || code == 431 || code == 501 ||
                                 code == 505);
                LEPUS_FUZZ_CHECK(parser.error_reason() != nullptr && *parser.error_reason());
                // Once failed, the parser stays failed.
                LEPUS_FUZZ_CHECK(parser.parse(buffer) == ParseStatus::Error);
                // Not the code: which limit or syntax error is met first may depend on
                // the split (64 token bytes then a control byte: 414 when the line
                // arrives in pieces, 400 when whole), and both answers are right.
                return transcript + "E\n";
            }
            check_and_describe(parser, buffer, limits, transcript);
            ++requests;
            const Request& request = parser.request();
            if (request.chunked) return transcript + "chunked body\n";
            uint64_t body = request.content_length.value_or(0);
            if (body > payload.size() - start - parser.head_size())
                return transcript + "body beyond the input\n";
            start += parser.head_size() + body;
            parser.reset();
        }
    }
    return transcript + (requests < kMaxRequests ? "A\n" : "limit\n");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    ParserLimits limits;
    if (input.options() & 1) {
        // Small limits, so that 414 and 431 are reached within the default max_len.
        limits.max_request_line = 64;
        limits.max_header_block = 256;
        limits.max_headers = 4;
    }
    std::string whole = run(input.payload(), {input.payload().size()}, limits);
    std::string split = run(input.payload(), input.cuts(), limits);
    // The outcome must not depend on how the bytes were split into reads.
    LEPUS_FUZZ_CHECK(whole == split);
    return 0;
}
