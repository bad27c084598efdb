// libFuzzer driver for parse_range (src/http/range.h).
//
// The representation size comes from the input (small sizes, where the edges
// are, or the payload's first eight bytes as a 64-bit number); the rest is the
// Range header value. Checked: every range returned has first <= last < size,
// Single is one range and Multiple several (at most kMaxRanges, adding up to
// no more than the size), only for a non-empty representation; the answer does
// not change when the header is copied elsewhere (no reads past its end: ASan
// sees those).
#include "fuzz_input.h"
#include "http/range.h"

#include <cstring>
#include <memory>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    std::span<const char> payload = input.payload();
    uint64_t file_size = 0;
    if (input.options() & 1) {
        if (payload.size() < 8) return 0;
        std::memcpy(&file_size, payload.data(), 8);
        payload = payload.subspan(8);
    } else {
        file_size = input.options() >> 1; // 0..31: the interesting edges
    }
    // An exact-size heap copy: a read one byte past the header is an ASan report.
    auto copy = std::make_unique<char[]>(payload.size());
    if (!payload.empty()) std::memcpy(copy.get(), payload.data(), payload.size());
    std::string_view header(copy.get(), payload.size());

    lepus::RangeSet ranges;
    lepus::RangeResult result = lepus::parse_range(header, file_size, ranges);
    switch (result) {
    case lepus::RangeResult::Single:
    case lepus::RangeResult::Multiple:
        LEPUS_FUZZ_CHECK(file_size > 0);
        LEPUS_FUZZ_CHECK((ranges.count == 1) == (result == lepus::RangeResult::Single));
        LEPUS_FUZZ_CHECK(ranges.count <= lepus::kMaxRanges);
        LEPUS_FUZZ_CHECK(ranges.total_length() <= file_size); // never amplified
        for (size_t i = 0; i < ranges.count; ++i) {
            LEPUS_FUZZ_CHECK(ranges.ranges[i].first <= ranges.ranges[i].last);
            LEPUS_FUZZ_CHECK(ranges.ranges[i].last < file_size);
        }
        break;
    case lepus::RangeResult::Unsatisfiable:
    case lepus::RangeResult::Ignore:
        break;
    }
    // A header that does not start with "bytes=" (case-insensitively) is never a range.
    bool bytes_unit = header.size() >= 6;
    for (size_t i = 0; bytes_unit && i < 6; ++i)
        bytes_unit = (header[i] | 0x20) == "bytes="[i];
    if (!bytes_unit) LEPUS_FUZZ_CHECK(result == lepus::RangeResult::Ignore);
    return 0;
}
