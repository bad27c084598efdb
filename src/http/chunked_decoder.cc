#include "http/chunked_decoder.h"

#include <algorithm>

namespace lepus {
namespace {

// Extensions and trailers are skipped, not stored; the bound only stops a client
// from streaming them forever.
constexpr size_t kMaxExtensionBytes = 4096;
constexpr size_t kMaxTrailerBytes = 32768;
// 15 hex digits: sizes below 2^60, far beyond any body we accept, and no overflow.
constexpr unsigned kMaxSizeDigits = 15;

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    char lower = static_cast<char>(c | 0x20);
    if (lower >= 'a' && lower <= 'f') return lower - 'a' + 10;
    return -1;
}

bool is_token_byte(char c) {
    if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return true;
    switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
        return true;
    default:
        return false;
    }
}

// field-vchar, obs-text, SP or HTAB (RFC 9110 §5.5); also what a chunk-ext may hold
// (tokens, "=", quoted strings): everything but control characters.
bool is_text_byte(char c) {
    auto byte = static_cast<unsigned char>(c);
    return byte == '\t' || (byte >= 0x20 && byte != 0x7f);
}

} // namespace

void ChunkedDecoder::reset() {
    state_ = State::Size;
    chunk_size_ = 0;
    size_digits_ = 0;
    size_started_ = false;
    line_bytes_ = 0;
    body_size_ = 0;
    body_too_large_ = false;
    error_reason_ = "";
}

ChunkedDecoder::Status ChunkedDecoder::fail(const char* reason) {
    state_ = State::Error;
    error_reason_ = reason;
    return Status::Error;
}

// One switch in one loop, like the request parser: a state machine over the
// bytes, kept whole on purpose (the one function here over 100 lines).
ChunkedDecoder::Status ChunkedDecoder::feed(std::span<const char> input, size_t& consumed,
                                            std::string& out) {
    consumed = 0;
    if (state_ == State::Done) return Status::Done;
    if (state_ == State::Error) return Status::Error;
    const char* buf = input.data();
    const size_t end = input.size();
    size_t p = 0;

    while (p < end) {
        char c = buf[p];
        switch (state_) {
        case State::Size: {
            int digit = hex_value(c);
            if (digit >= 0) {
                if (chunk_size_ != 0 || digit != 0) ++size_digits_;
                if (size_digits_ > kMaxSizeDigits) return fail("chunk size too large");
                if (++line_bytes_ > kMaxExtensionBytes) return fail("chunk size line too long");
                chunk_size_ = chunk_size_ * 16 + static_cast<unsigned>(digit);
                size_started_ = true;
                ++p;
                break;
            }
            if (!size_started_) return fail("invalid chunk size");
            if (c == '\r') {
                state_ = State::SizeLf;
            } else if (c == ';') {
                state_ = State::Extension;
            } else if (c == ' ' || c == '\t') {
                state_ = State::SizeSpace; // BWS before ";" (RFC 9112 §7.1.1)
            } else {
                return fail("invalid chunk size");
            }
            ++p;
            break;
        }

        case State::SizeSpace:
            if (c == ';') {
                state_ = State::Extension;
            } else if (c != ' ' && c != '\t') {
                return fail("invalid chunk extension");
            }
            ++p;
            break;

        case State::Extension:
            if (c == '\r') {
                state_ = State::SizeLf;
            } else if (!is_text_byte(c)) {
                return fail("invalid chunk extension");
            } else if (++line_bytes_ > kMaxExtensionBytes) {
                return fail("chunk extensions too long");
            }
            ++p;
            break;

        case State::SizeLf:
            if (c != '\n') return fail("bare CR in chunk size line");
            ++p;
            line_bytes_ = 0;
            if (chunk_size_ == 0) {
                state_ = State::TrailerStart;
                break;
            }
            // Refuse before reading the data: the client may wait for 100-continue.
            if (chunk_size_ > max_body_size_ - body_size_) {
                body_too_large_ = true;
                return fail("chunked body too large");
            }
            state_ = State::Data;
            break;

        case State::Data: {
            size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_size_, end - p));
            out.append(buf + p, n);
            p += n;
            body_size_ += n;
            chunk_size_ -= n;
            if (chunk_size_ == 0) state_ = State::DataCr;
            break;
        }

        case State::DataCr:
            if (c != '\r') return fail("chunk data not followed by CRLF");
            state_ = State::DataLf;
            ++p;
            break;

        case State::DataLf:
            if (c != '\n') return fail("chunk data not followed by CRLF");
            state_ = State::Size;
            size_digits_ = 0;
            size_started_ = false;
            ++p;
            break;

        case State::TrailerStart:
            if (c == '\r') {
                state_ = State::EndLf;
            } else if (is_token_byte(c)) {
                state_ = State::TrailerName;
            } else {
                return fail("invalid trailer field");
            }
            ++p;
            break;

        case State::TrailerName:
            if (c == ':') {
                state_ = State::TrailerValue;
            } else if (!is_token_byte(c)) {
                return fail("invalid trailer field name");
            }
            ++p;
            break;

        case State::TrailerValue:
            if (c == '\r') {
                state_ = State::TrailerLf;
            } else if (!is_text_byte(c)) {
                return fail("invalid trailer field value");
            }
            ++p;
            break;

        case State::TrailerLf:
            if (c != '\n') return fail("bare CR in trailer");
            state_ = State::TrailerStart;
            ++p;
            break;

        case State::EndLf:
            if (c != '\n') return fail("bare CR after trailers");
            consumed = p + 1;
            state_ = State::Done;
            return Status::Done;

        case State::Done:
        case State::Error:
            break; // unreachable: handled on entry
        }
        if (state_ >= State::TrailerStart && ++line_bytes_ > kMaxTrailerBytes)
            return fail("trailer section too large");
    }
    consumed = p;
    return Status::Again;
}

} // namespace lepus
