// Range requests (RFC 9110 §14): parsing a "bytes=" Range header against the
// size of the selected representation, and the framing of a multipart/byteranges
// answer when it asks for several ranges (§14.6).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lepus {

// An inclusive byte range; always first <= last < size when returned.
struct ByteRange {
    uint64_t first = 0;
    uint64_t last = 0;
    uint64_t length() const { return last - first + 1; }
};

// The most range-specs one Range header may hold. Past it the header is
// ignored (the whole representation, 200): many tiny ranges cost a part head
// each (about 100 bytes), the amplification of CVE-2011-3192. Apache allows
// 200 (MaxRanges), nginx any number; a browser, a PDF reader or a download
// manager asks for a handful.
inline constexpr size_t kMaxRanges = 16;

// The satisfiable ranges of one Range header, in the order asked (§14.2).
struct RangeSet {
    std::array<ByteRange, kMaxRanges> ranges{};
    size_t count = 0;
    const ByteRange& front() const { return ranges[0]; }
    uint64_t total_length() const;
};

enum class RangeResult {
    Ignore,        // absent, not "bytes", malformed or abusive (§14.2: a server MAY
                   // ignore it) -> 200 with the whole representation
    Single,        // one satisfiable range -> 206 with Content-Range
    Multiple,      // several satisfiable ranges -> 206 multipart/byteranges
    Unsatisfiable, // well-formed but no range overlaps the representation -> 416
};

// Parses `header` (the Range field value) for a representation of `size` bytes
// into `out` (its satisfiable ranges; the unsatisfiable ones are dropped).
// Malformed, for this function: a missing "bytes=", a spec without digits, a
// first-pos greater than last-pos ("bytes=5-2", §14.1.1 calls it invalid) or a
// number that overflows 64 bits. "-0" is a valid but unsatisfiable suffix.
// Abusive, and so ignored: more than kMaxRanges specs, or ranges that add up
// to more than the representation (overlapping ones, as nginx refuses them:
// §14.2 lets a server ignore overlapping ranges, and an answer never grows
// past the whole representation plus the part heads).
RangeResult parse_range(std::string_view header, uint64_t size, RangeSet& out);

// A boundary that cannot be guessed, so a file cannot hold it on purpose
// (RFC 2046 §5.1.1): 16 random hex digits (getrandom).
std::string make_multipart_boundary();

// Appends the delimiter and head of one part of a multipart/byteranges body
// (§14.6): "\r\n--<boundary>\r\nContent-Type: ..\r\nContent-Range: bytes
// a-b/size\r\n\r\n", without the first CRLF when `out` is empty (the body's
// first part). The part's bytes follow.
void append_part_head(std::string_view boundary, std::string_view content_type, ByteRange range,
                      uint64_t size, std::string& out);

// Appends the close delimiter, "\r\n--<boundary>--\r\n".
void append_multipart_end(std::string_view boundary, std::string& out);

} // namespace lepus
