// FuzzInput: turns one libFuzzer input into a payload and a way of splitting it,
// so that every driver can check that a resumable parser gives the same answer
// however the bytes arrive (muduo's testParseRequestInTwoPieces, generalised).
//
// Layout of an input: byte 0 chooses the split mode (its two low bits) and
// driver-specific options (the six high bits, see options()); byte 1 is the
// split parameter; the payload is everything after. Seed files in
// test/fuzz/corpus/ start with these two bytes (test/fuzz/make_corpus.py).
// This is a test-only header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace lepus::fuzz {

// Prints the broken invariant and aborts: libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(const char* file, int line, const char* what) {
    std::fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    std::abort();
}

#define LEPUS_FUZZ_CHECK(condition)                                                                \
    do {                                                                                           \
        if (!(condition)) ::lepus::fuzz::fail(__FILE__, __LINE__, #condition);                     \
    } while (0)

class FuzzInput {
public:
    FuzzInput(const uint8_t* data, size_t size) {
        if (size >= 2) {
            mode_ = data[0];
            parameter_ = data[1];
            payload_ = std::span<const char>(reinterpret_cast<const char*>(data) + 2, size - 2);
        }
    }

    // The bytes to parse.
    std::span<const char> payload() const { return payload_; }

    // Bits the driver may use for its own choices (limits, body size caps).
    unsigned options() const { return mode_ >> 2; }

    // Increasing end offsets of the pieces the payload is delivered in; the last is
    // payload().size(). Mode 0: one piece; 1: one byte per piece; 2: two pieces cut at
    // a position proportional to the parameter; 3: pieces of 1..16 bytes, sizes drawn
    // from a generator seeded with the parameter.
    std::vector<size_t> cuts() const {
        const size_t size = payload_.size();
        std::vector<size_t> out;
        switch (mode_ & 3) {
        case 0:
            break;
        case 1:
            for (size_t i = 1; i < size; ++i)
                out.push_back(i);
            break;
        case 2:
            if (size > 1) out.push_back(1 + (size - 1) * parameter_ / 256);
            break;
        case 3: {
            uint32_t state = 0x9e3779b9u ^ parameter_;
            for (size_t at = 0;;) {
                // xorshift32: cheap, deterministic, good enough to vary piece sizes
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                at += 1 + state % 16;
                if (at >= size) break;
                out.push_back(at);
            }
            break;
        }
        }
        out.push_back(size);
        return out;
    }

private:
    uint8_t mode_ = 0;
    uint8_t parameter_ = 0;
    std::span<const char> payload_;
};

// True when `view` lies inside `buffer` (an empty view anywhere is fine: it is never read).
template <class View> bool lies_inside(const View& view, std::span<const char> buffer) {
    if (view.empty()) return true;
    auto begin = reinterpret_cast<uintptr_t>(buffer.data());
    auto at = reinterpret_cast<uintptr_t>(view.data());
    return at >= begin && at + view.size() <= begin + buffer.size();
}

} // namespace lepus::fuzz
