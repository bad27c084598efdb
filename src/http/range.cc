#include "http/range.h"

#include <atomic>
#include <ctime>
#include <sys/random.h>

namespace lepus {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t';
}

// Reads 1+ digits at text[pos]; false on no digit or on overflow.
bool read_number(std::string_view text, size_t& pos, uint64_t& value) {
    size_t start = pos;
    value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        auto digit = uint64_t(text[pos] - '0');
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
        ++pos;
    }
    return pos > start;
}

enum class SpecResult { Malformed, Satisfiable, Unsatisfiable };

// One range-spec (§14.1.1): "a-b", "a-" or "-n", clipped to the representation.
SpecResult parse_spec(std::string_view spec, uint64_t size, ByteRange& range) {
    size_t pos = 0;
    if (!spec.empty() && spec[0] == '-') {
        uint64_t suffix;
        ++pos;
        if (!read_number(spec, pos, suffix) || pos != spec.size()) return SpecResult::Malformed;
        // §14.1.3: a suffix range on an empty representation, or of length 0, selects nothing.
        if (suffix == 0 || size == 0) return SpecResult::Unsatisfiable;
        range.first = suffix >= size ? 0 : size - suffix;
        range.last = size - 1;
        return SpecResult::Satisfiable;
    }
    uint64_t first, last = UINT64_MAX;
    if (!read_number(spec, pos, first) || pos == spec.size() || spec[pos] != '-')
        return SpecResult::Malformed;
    ++pos;
    if (pos < spec.size()) {
        if (!read_number(spec, pos, last) || pos != spec.size()) return SpecResult::Malformed;
        if (last < first) return SpecResult::Malformed;
    }
    if (first >= size) return SpecResult::Unsatisfiable;
    range.first = first;
    range.last = last >= size ? size - 1 : last;
    return SpecResult::Satisfiable;
}

} // namespace

uint64_t RangeSet::total_length() const {
    uint64_t total = 0;
    for (size_t i = 0; i < count; ++i) {
        uint64_t length = ranges[i].length();
        total = total > UINT64_MAX - length ? UINT64_MAX : total + length;
    }
    return total;
}

RangeResult parse_range(std::string_view header, uint64_t size, RangeSet& out) {
    out.count = 0;
    // §14.1: range units are case-insensitive.
    constexpr std::string_view kUnit = "bytes=";
    if (header.size() < kUnit.size()) return RangeResult::Ignore;
    for (size_t i = 0; i < kUnit.size(); ++i) {
        char c = header[i];
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        if (c != kUnit[i]) return RangeResult::Ignore;
    }
    std::string_view set = header.substr(kUnit.size());

    // range-set = 1#range-spec: comma-separated, OWS around commas, empty elements allowed.
    size_t satisfiable = 0, specs = 0;
    size_t pos = 0;
    while (pos <= set.size()) {
        size_t comma = set.find(',', pos);
        if (comma == std::string_view::npos) comma = set.size();
        std::string_view spec = set.substr(pos, comma - pos);
        while (!spec.empty() && is_space(spec.front()))
            spec.remove_prefix(1);
        while (!spec.empty() && is_space(spec.back()))
            spec.remove_suffix(1);
        if (!spec.empty()) {
            if (++specs > kMaxRanges) return RangeResult::Ignore;
            ByteRange range;
            switch (parse_spec(spec, size, range)) {
            case SpecResult::Malformed:
                return RangeResult::Ignore;
            case SpecResult::Satisfiable:
                out.ranges[satisfiable++] = range;
                break;
            case SpecResult::Unsatisfiable:
                break;
            }
        }
        pos = comma + 1;
    }
    out.count = satisfiable;
    if (specs == 0) return RangeResult::Ignore;
    if (satisfiable == 0) return RangeResult::Unsatisfiable;
    // §15.3.7.1: one part goes as a plain 206 with Content-Range, even when
    // other specs were unsatisfiable.
    if (satisfiable == 1) return RangeResult::Single;
    if (out.total_length() > size) return RangeResult::Ignore; // overlaps: see range.h
    return RangeResult::Multiple;
}

std::string make_multipart_boundary() {
    uint64_t bits = 0;
    if (getrandom(&bits, sizeof bits, 0) != ssize_t(sizeof bits)) {
        static std::atomic<uint64_t> counter{uint64_t(time(nullptr)) << 20};
        bits = ++counter * 0x9e3779b97f4a7c15ULL;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string boundary(16, '0');
    for (char& c : boundary) {
        c = kHex[bits & 15];
        bits >>= 4;
    }
    return boundary;
}

void append_part_head(std::string_view boundary, std::string_view content_type, ByteRange range,
                      uint64_t size, std::string& out) {
    if (!out.empty()) out.append("\r\n");
    out.append("--").append(boundary).append("\r\n");
    if (!content_type.empty()) out.append("Content-Type: ").append(content_type).append("\r\n");
    out.append("Content-Range: bytes ")
        .append(std::to_string(range.first))
        .append("-")
        .append(std::to_string(range.last))
        .append("/")
        .append(std::to_string(size))
        .append("\r\n\r\n");
}

void append_multipart_end(std::string_view boundary, std::string& out) {
    out.append("\r\n--").append(boundary).append("--\r\n");
}

} // namespace lepus
