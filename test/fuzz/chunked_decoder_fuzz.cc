// libFuzzer driver for ChunkedDecoder (src/http/chunked_decoder.h).
//
// The payload is a chunked body delivered in the pieces FuzzInput chooses.
// Checked: consumed never exceeds the piece and Again consumes all of it; the
// decoded size never exceeds the bytes consumed nor max_body_size, and equals
// body_size(); Done and Error are sticky; the outcome (status, decoded bytes,
// where the body ended, too-large or not) is the same however the body was split.
#include "fuzz_input.h"
#include "http/chunked_decoder.h"

#include <limits>
#include <string>
#include <vector>

namespace {

using lepus::ChunkedDecoder;
using Status = ChunkedDecoder::Status;

struct Outcome {
    Status status = Status::Again;
    std::string body;
    size_t consumed = 0; // bytes of the payload the decoder took
    bool too_large = false;
    bool operator==(const Outcome&) const = default;
};

Outcome run(std::span<const char> payload, const std::vector<size_t>& cuts, uint64_t max_body) {
    ChunkedDecoder decoder(max_body);
    Outcome outcome;
    for (size_t cut : cuts) {
        std::span<const char> piece = payload.subspan(outcome.consumed, cut - outcome.consumed);
        size_t consumed = 0;
        outcome.status = decoder.feed(piece, consumed, outcome.body);
        if (outcome.status == Status::Error) {
            outcome.too_large = decoder.body_too_large();
            LEPUS_FUZZ_CHECK(*decoder.error_reason() != '\0');
            LEPUS_FUZZ_CHECK(decoder.feed(piece, consumed, outcome.body) == Status::Error);
            outcome.consumed = 0; // meaningless after an error (see the header)
            return outcome;
        }
        LEPUS_FUZZ_CHECK(consumed <= piece.size());
        if (outcome.status == Status::Again) LEPUS_FUZZ_CHECK(consumed == piece.size());
        outcome.consumed += consumed;
        // Decoding only removes framing: the body never outgrows what was read.
        LEPUS_FUZZ_CHECK(outcome.body.size() <= outcome.consumed);
        LEPUS_FUZZ_CHECK(outcome.body.size() == decoder.body_size());
        LEPUS_FUZZ_CHECK(decoder.body_size() <= max_body);
        if (outcome.status == Status::Done) {
            LEPUS_FUZZ_CHECK(consumed > 0 && piece[consumed - 1] == '\n');
            size_t again = 1;
            LEPUS_FUZZ_CHECK(decoder.feed(piece, again, outcome.body) == Status::Done);
            LEPUS_FUZZ_CHECK(again == 0);
            return outcome;
        }
    }
    return outcome;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    // Option bit 0: a small body cap (0..1984 bytes), to reach the 413 path.
    uint64_t max_body =
        (input.options() & 1) ? 64 * (input.options() >> 1) : std::numeric_limits<uint64_t>::max();
    Outcome whole = run(input.payload(), {input.payload().size()}, max_body);
    Outcome split = run(input.payload(), input.cuts(), max_body);
    LEPUS_FUZZ_CHECK(whole == split);
    return 0;
}
