#include "log/log_level.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

TEST(LogLevel, ParsesTheFourNames) {
    EXPECT_EQ(parse_log_level("error"), LogLevel::Error);
    EXPECT_EQ(parse_log_level("warn"), LogLevel::Warn);
    EXPECT_EQ(parse_log_level("info"), LogLevel::Info);
    EXPECT_EQ(parse_log_level("debug"), LogLevel::Debug);
    EXPECT_EQ(parse_log_level("WARN"), LogLevel::Warn);
}

TEST(LogLevel, RejectsAnythingElse) {
    EXPECT_EQ(parse_log_level(""), std::nullopt);
    EXPECT_EQ(parse_log_level("warning"), std::nullopt);
    EXPECT_EQ(parse_log_level("err"), std::nullopt);
    EXPECT_EQ(parse_log_level("info "), std::nullopt);
}

TEST(LogLevel, NamesRoundTrip) {
    for (LogLevel level : {LogLevel::Error, LogLevel::Warn, LogLevel::Info, LogLevel::Debug}) {
        EXPECT_EQ(parse_log_level(log_level_name(level)), level);
    }
}

} // namespace
} // namespace lepus
