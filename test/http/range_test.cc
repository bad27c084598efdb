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
        {"bytes=0-1, 200-300", 100, RangeResult::Multiple, 0, 1},
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
        ByteRange range;
        RangeResult result = parse_range(c.header, c.size, range);
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
        ByteRange range{12345, 0};
        RangeResult result = parse_range(header, size, range);
        if (result == RangeResult::Single || result == RangeResult::Multiple) {
            ++satisfied;
            EXPECT_LE(range.first, range.last) << header << " size " << size;
            EXPECT_LT(range.last, size) << header << " size " << size;
        }
    }
    EXPECT_GT(satisfied, 100);
}

} // namespace
} // namespace lepus
