// libFuzzer driver for fastcgi::CgiResponseParser (src/fastcgi/cgi_response.h).
//
// The payload is the start of a STDOUT stream (CGI header block, then body)
// delivered in the pieces FuzzInput chooses. Checked: consumed never exceeds the
// piece and Again consumes all of it; Done -> the block ends with LF, a final status in
// 200..599 (a 1xx is an Error: issue 14), header views readable and their names non-empty; the
// header block never exceeds kMaxHeaderBlock; errors are sticky; the outcome (status, reason,
// headers, Content-Length, where the body starts) does not depend on the split.
#include "fastcgi/cgi_response.h"
#include "fuzz_input.h"

#include <string>
#include <vector>

namespace {

namespace fcgi = lepus::fastcgi;

std::string run(std::span<const char> payload, const std::vector<size_t>& cuts) {
    fcgi::CgiResponseParser parser;
    size_t offset = 0;
    for (size_t cut : cuts) {
        std::span<const char> piece = payload.subspan(offset, cut - offset);
        size_t consumed = 0;
        fcgi::CgiParseStatus status = parser.feed(piece, consumed);
        LEPUS_FUZZ_CHECK(consumed <= piece.size());
        offset += consumed;
        LEPUS_FUZZ_CHECK(offset <= fcgi::CgiResponseParser::kMaxHeaderBlock);
        if (status == fcgi::CgiParseStatus::Again) {
            LEPUS_FUZZ_CHECK(consumed == piece.size());
            continue;
        }
        if (status == fcgi::CgiParseStatus::Error) {
            LEPUS_FUZZ_CHECK(!parser.error().empty());
            LEPUS_FUZZ_CHECK(parser.feed(piece, consumed) == fcgi::CgiParseStatus::Error);
            return "error: " + std::string(parser.error());
        }
        LEPUS_FUZZ_CHECK(consumed > 0 && piece[consumed - 1] == '\n');
        LEPUS_FUZZ_CHECK(parser.status() >= 200 &&
                         parser.status() <= 599); // never a 1xx (issue 14)
        std::string transcript =
            "status " + std::to_string(parser.status()) + " " + std::string(parser.reason()) + "\n";
        for (const lepus::Header& header : parser.headers()) {
            LEPUS_FUZZ_CHECK(!header.name.empty());
            transcript.append(header.name).append(": ").append(header.value).append("\n");
        }
        if (parser.content_length())
            transcript += "length " + std::to_string(*parser.content_length()) + "\n";
        return transcript + "body at " + std::to_string(offset);
    }
    return "again";
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    std::string whole = run(input.payload(), {input.payload().size()});
    std::string split = run(input.payload(), input.cuts());
    LEPUS_FUZZ_CHECK(whole == split);
    return 0;
}
