// ChunkedDecoder: incremental decoder of the chunked transfer coding (RFC 9112 §7.1).
//
// Resumable at any byte: feed it whatever arrived, it appends the decoded bytes to
// a caller-provided string (one copy, into the buffer the handler consumes anyway)
// and keeps its place for the next call. Chunk extensions are validated and skipped;
// trailer fields are validated and dropped. Unlike the head parser, chunk framing
// requires CRLF: a bare LF in chunk lines is a known smuggling vector between
// front ends that disagree on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

namespace lepus {

class ChunkedDecoder {
public:
    enum class Status { Again, Done, Error };

    // Bodies larger than max_body_size decoded bytes fail with body_too_large().
    explicit ChunkedDecoder(uint64_t max_body_size = std::numeric_limits<uint64_t>::max())
        : max_body_size_(max_body_size) {}

    // Decodes from `input`, appending body bytes to `out`; `consumed` is set to the
    // bytes of `input` used. Again: all of `input` was used, send more. Done: the
    // last chunk and the trailer section ended at input[consumed - 1]; what follows
    // belongs to the next request. Error: malformed (answer 400) or too large (413);
    // the connection cannot be reused, so `consumed` is then meaningless.
    Status feed(std::span<const char> input, size_t& consumed, std::string& out);

    // Decoded body bytes so far.
    uint64_t body_size() const { return body_size_; }

    // After Error: true when the body exceeded max_body_size (answer 413, not 400).
    bool body_too_large() const { return body_too_large_; }

    // After Error: a short description for the error log.
    const char* error_reason() const { return error_reason_; }

    // Ready for the next body; keeps max_body_size.
    void reset();

private:
    enum class State : uint8_t {
        Size,         // in the hex chunk-size
        SizeSpace,    // in BWS after the size, before ";"
        Extension,    // in chunk extensions, skipped
        SizeLf,       // after the CR of the chunk-size line
        Data,         // in chunk-data
        DataCr,       // after chunk-data, expecting CR
        DataLf,       // expecting LF after chunk-data
        TrailerStart, // at the start of a trailer line or of the final empty line
        TrailerName,  // in a trailer field name
        TrailerValue, // in a trailer field value
        TrailerLf,    // after the CR of a trailer line
        EndLf,        // after the CR of the final empty line
        Done,
        Error,
    };

    Status fail(const char* reason);

    uint64_t max_body_size_;
    State state_ = State::Size;
    uint64_t chunk_size_ = 0;  // size of the current chunk, then bytes of it still to come
    unsigned size_digits_ = 0; // significant hex digits of the current chunk-size
    bool size_started_ = false;
    size_t line_bytes_ = 0; // bytes of extensions or trailers so far, bounded
    uint64_t body_size_ = 0;
    bool body_too_large_ = false;
    const char* error_reason_ = "";
};

} // namespace lepus
