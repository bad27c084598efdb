// Range requests (RFC 9110 §14): parsing a "bytes=" Range header against the
// size of the selected representation.
#pragma once

#include <cstdint>
#include <string_view>

namespace lepus {

// An inclusive byte range; always first <= last < size when returned.
struct ByteRange {
    uint64_t first = 0;
    uint64_t last = 0;
    uint64_t length() const { return last - first + 1; }
};

enum class RangeResult {
    Ignore,        // absent, not "bytes", or malformed (§14.2: a server MAY ignore it) -> 200
    Single,        // one satisfiable range in `out` -> 206
    Multiple,      // several ranges, at least one satisfiable -> 200 with the whole
                   // representation (we do not send multipart/byteranges)
    Unsatisfiable, // well-formed but no range overlaps the representation -> 416
};

// Parses `header` (the Range field value) for a representation of `size` bytes.
// Malformed, for this function: a missing "bytes=", a spec without digits, a
// first-pos greater than last-pos ("bytes=5-2", §14.1.1 calls it invalid) or a
// number that overflows 64 bits. "-0" is a valid but unsatisfiable suffix.
RangeResult parse_range(std::string_view header, uint64_t size, ByteRange& out);

} // namespace lepus
