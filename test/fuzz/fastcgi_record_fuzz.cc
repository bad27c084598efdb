// libFuzzer driver for fastcgi::RecordDecoder (src/fastcgi/protocol.h), and for
// the readers of record bodies (NameValueReader, parse_begin_request,
// parse_end_request) on what it decodes.
//
// The payload is a FastCGI byte stream delivered in the pieces FuzzInput
// chooses. Checked: consumed never exceeds the piece and Again consumes all of
// it; a record's content is at most 65535 bytes and readable in full (ASan checks
// the view); the decoder is at a record boundary after each Done; errors are
// sticky and only for a bad version; name-value pairs lie inside the content; and
// the list of records is the same however the stream was split.
#include "fastcgi/protocol.h"
#include "fuzz_input.h"

#include <string>
#include <vector>

namespace {

namespace fcgi = lepus::fastcgi;
using lepus::fuzz::lies_inside;

void check_body(const fcgi::Record& record, std::string& transcript) {
    if (record.type == fcgi::RecordType::Params || record.type == fcgi::RecordType::GetValues ||
        record.type == fcgi::RecordType::GetValuesResult) {
        fcgi::NameValueReader reader(record.content);
        std::string_view name, value;
        size_t pairs = 0;
        while (reader.next(name, value)) {
            LEPUS_FUZZ_CHECK(lies_inside(name, record.content));
            LEPUS_FUZZ_CHECK(lies_inside(value, record.content));
            ++pairs;
        }
        transcript += " pairs=" + std::to_string(pairs) + (reader.error() ? "!" : "");
    }
    if (auto begin = fcgi::parse_begin_request(record.content))
        transcript += " begin=" + std::to_string(static_cast<int>(begin->role));
    if (auto end = fcgi::parse_end_request(record.content))
        transcript += " end=" + std::to_string(end->app_status);
}

std::string run(std::span<const char> payload, const std::vector<size_t>& cuts) {
    fcgi::RecordDecoder decoder;
    std::string transcript;
    size_t offset = 0;
    for (size_t cut : cuts) {
        while (offset < cut) {
            std::span<const char> piece = payload.subspan(offset, cut - offset);
            size_t consumed = 0;
            fcgi::DecodeStatus status = decoder.feed(piece, consumed);
            LEPUS_FUZZ_CHECK(consumed <= piece.size());
            offset += consumed;
            if (status == fcgi::DecodeStatus::Error) {
                LEPUS_FUZZ_CHECK(decoder.error() == fcgi::DecodeError::BadVersion);
                LEPUS_FUZZ_CHECK(decoder.feed(piece, consumed) == fcgi::DecodeStatus::Error);
                return transcript + "E@" + std::to_string(offset) + "\n";
            }
            if (status == fcgi::DecodeStatus::Again) {
                LEPUS_FUZZ_CHECK(consumed == piece.size());
                LEPUS_FUZZ_CHECK(!decoder.at_record_boundary() || piece.empty());
                continue;
            }
            const fcgi::Record& record = decoder.record();
            LEPUS_FUZZ_CHECK(consumed > 0);
            LEPUS_FUZZ_CHECK(record.content.size() <= fcgi::kMaxContentLength);
            LEPUS_FUZZ_CHECK(decoder.at_record_boundary());
            transcript += std::to_string(static_cast<int>(record.type)) + "/" +
                          std::to_string(record.request_id) + " ";
            transcript.append(record.content.data(), record.content.size());
            check_body(record, transcript);
            transcript += "\n";
        }
    }
    return transcript + (decoder.at_record_boundary() ? "end\n" : "partial\n");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    std::string whole = run(input.payload(), {input.payload().size()});
    std::string split = run(input.payload(), input.cuts());
    LEPUS_FUZZ_CHECK(whole == split);
    return 0;
}
