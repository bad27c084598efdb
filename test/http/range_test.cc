#include "http/range.h"

#include <gtest/gtest.h>
#include <random>
#include <string>

namespace lepus {
namespace {

struct RangeCase {
    const char* header;
    uint64_t size;
    RangeResult result;
    uint64_t first = 0, last = 0;
};

TEST(ParseRange, Table) {
    const RangeCase cases[] = {
        {"bytes=0-9", 100, RangeResult::Single, 0, 9},
        {"bytes=10-", 100, RangeResult::Single, 10, 99},
        {"bytes=-10", 100, RangeResult::Single, 90, 99},
        {"bytes=-200", 100, RangeResult::Single, 0, 99},
        {"bytes=0-1000", 100, RangeResult::Single, 0, 99},
        {"bytes=99-99", 100, RangeResult::Single, 99, 99},
        {"bytes=0-0", 1, RangeResult::Single, 0, 0},
        {"BYTES=0-0", 100, RangeResult::Single, 0, 0},
        {"bytes= 5-6 ", 100, RangeResult::Single, 5, 6},
        {"bytes=5-6,,", 100, RangeResult::Single, 5, 6},
        {"bytes=0-18446744073709551615", 100, RangeResult::Single, 0, 99},
        {"bytes=100-", 100, RangeResult::Unsatisfiable},
        {"bytes=100-200", 100, RangeResult::Unsatisfiable},
        {"bytes=-0", 100, RangeResult::Unsatisfiable},
        {"bytes=18446744073709551615-", 100, RangeResult::Unsatisfiable},
        {"bytes=0-", 0, RangeResult::Unsatisfiable},
        {"bytes=-5", 0, RangeResult::Unsatisfiable},
        {"bytes=200-300,400-", 100, RangeResult::Unsatisfiable},
        {"bytes=0-1,5-6", 100, RangeResult::Multiple, 0, 1},
        {"bytes=0-1, 200-300", 100, RangeResult::Single, 0, 1},
        {"bytes=200-300, -3", 100, RangeResult::Single, 97, 99},
        {"bytes=0-,0-", 100, RangeResult::Ignore}, // 200 bytes of 100: overlaps
        {"bytes=0-49,50-99", 100, RangeResult::Multiple, 0, 49},
        {"bytes=0-50,50-99", 100, RangeResult::Ignore},
        {"bytes=5-2", 100, RangeResult::Ignore},
        {"bytes=99999999999999999999-", 100, RangeResult::Ignore},
        {"bytes=0-99999999999999999999", 100, RangeResult::Ignore},
        {"bytes=-99999999999999999999", 100, RangeResult::Ignore},
        {"bytes=", 100, RangeResult::Ignore},
        {"bytes=-", 100, RangeResult::Ignore},
        {"bytes=abc", 100, RangeResult::Ignore},
        {"bytes=1-2-3", 100, RangeResult::Ignore},
        {"bytes=1 -2", 100, RangeResult::Ignore},
        {"bytes=0-1,x", 100, RangeResult::Ignore},
        {"bytes=+1-2", 100, RangeResult::Ignore},
        {"items=0-1", 100, RangeResult::Ignore},
        {"bytes 0-1", 100, RangeResult::Ignore},
        {"", 100, RangeResult::Ignore},
    };
    for (const RangeCase& c : cases) {
        RangeSet ranges;
        RangeResult result = parse_range(c.header, c.size, ranges);
        const ByteRange& range = ranges.front();
        EXPECT_EQ(int(result), int(c.result)) << c.header;
        if (result == c.result &&
            (result == RangeResult::Single || result == RangeResult::Multiple)) {
            EXPECT_EQ(range.first, c.first) << c.header;
            EXPECT_EQ(range.last, c.last) << c.header;
        }
    }
}

// The fuzzing invariant: every range returned lies inside the file.
TEST(ParseRange, ReturnedRangesLieInsideTheFile) {
    const char* pieces[] = {"0", "1", "9", "-", ",", " ", "18446744073709551615", "5", "99"};
    std::mt19937 random(777);
    int satisfied = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string header = "bytes=";
        size_t count = random() % 6;
        for (size_t j = 0; j < count; ++j)
            header += pieces[random() % std::size(pieces)];
        uint64_t size = random() % 3 == 0 ? 0 : random() % 200;
        RangeSet ranges;
        RangeResult result = parse_range(header, size, ranges);
        if (result == RangeResult::Single || result == RangeResult::Multiple) {
            ++satisfied;
            EXPECT_EQ(ranges.count == 1, result == RangeResult::Single) << header;
            EXPECT_LE(ranges.total_length(), size) << header << " size " << size;
            for (size_t k = 0; k < ranges.count; ++k) {
                EXPECT_LE(ranges.ranges[k].first, ranges.ranges[k].last) << header;
                EXPECT_LT(ranges.ranges[k].last, size) << header << " size " << size;
            }
        }
    }
    EXPECT_GT(satisfied, 100);
}

TEST(ParseRange, MultipleKeepsEveryRangeInOrder) {
    RangeSet ranges;
    ASSERT_EQ(parse_range("bytes=50-59, 0-9, 1000-, -5", 100, ranges), RangeResult::Multiple);
    ASSERT_EQ(ranges.count, 3u); // the unsatisfiable 1000- is dropped
    EXPECT_EQ(ranges.ranges[0].first, 50u);
    EXPECT_EQ(ranges.ranges[1].first, 0u);
    EXPECT_EQ(ranges.ranges[2].first, 95u);
    EXPECT_EQ(ranges.total_length(), 25u);
}

// CVE-2011-3192: many ranges, or ranges that repeat the file, are ignored.
TEST(ParseRange, AbusiveSetsAreIgnored) {
    std::string header = "bytes=";
    for (size_t i = 0; i < kMaxRanges; ++i)
        header += std::to_string(i * 2) + "-" + std::to_string(i * 2) + ",";
    RangeSet ranges;
    EXPECT_EQ(parse_range(header, 1000, ranges), RangeResult::Multiple);
    EXPECT_EQ(ranges.count, kMaxRanges);
    header += "900-900";
    EXPECT_EQ(parse_range(header, 1000, ranges), RangeResult::Ignore) << "one range too many";
    EXPECT_EQ(parse_range("bytes=0-,1-,2-", 1000, ranges), RangeResult::Ignore);
    EXPECT_EQ(parse_range("bytes=0-0,0-0", 1000, ranges), RangeResult::Multiple)
        << "a small overlap within the size is served";
    EXPECT_EQ(parse_range("bytes=-1,-1,-1", 2, ranges), RangeResult::Ignore);
}

TEST(Multipart, PartHeadsAndEnd) {
    std::string body;
    append_part_head("b0", "text/plain", {0, 1}, 10, body);
    body += "ab";
    append_part_head("b0", "text/plain", {8, 9}, 10, body);
    body += "ij";
    append_multipart_end("b0", body);
    EXPECT_EQ(body, "--b0\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\nab"
                    "\r\n--b0\r\nContent-Type: text/plain\r\nContent-Range: bytes 8-9/10\r\n\r\nij"
                    "\r\n--b0--\r\n");
}

} // namespace
} // namespace lepus
