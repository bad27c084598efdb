#include "base/units.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

TEST(ParseDuration, PlainNumberIsSeconds) {
    EXPECT_EQ(parse_duration_ms("30"), 30000u);
}

TEST(ParseDuration, Units) {
    EXPECT_EQ(parse_duration_ms("500ms"), 500u);
    EXPECT_EQ(parse_duration_ms("10s"), 10000u);
    EXPECT_EQ(parse_duration_ms("2m"), 120000u);
    EXPECT_EQ(parse_duration_ms("1h"), 3600000u);
    EXPECT_EQ(parse_duration_ms("0"), 0u);
}

TEST(ParseDuration, RejectsBadInput) {
    for (const char* bad :
         {"", "-1", "1.5s", "10x", "s", "ms", " 10", "10 s", "99999999999999999999"})
        EXPECT_FALSE(parse_duration_ms(bad).has_value()) << bad;
}

TEST(ParseSize, Units) {
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("64k"), 65536u);
    EXPECT_EQ(parse_size("64KiB"), 65536u);
    EXPECT_EQ(parse_size("1m"), 1048576u);
    EXPECT_EQ(parse_size("1G"), 1073741824u);
    EXPECT_EQ(parse_size("7b"), 7u);
}

TEST(ParseSize, RejectsBadInput) {
    for (const char* bad : {"", "-5", "1.5m", "12t", "k", "18446744073709551615k"})
        EXPECT_FALSE(parse_size(bad).has_value()) << bad;
}

} // namespace
} // namespace lepus
