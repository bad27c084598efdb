#include "base/civil_time.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

std::string imf_fixdate(time_t t) {
    char text[kImfFixdateLength];
    format_imf_fixdate(t, text);
    return {text, kImfFixdateLength};
}

TEST(CivilTime, DaysFromCivilKnownDates) {
    EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
    EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
    EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
    EXPECT_EQ(days_from_civil(1994, 11, 6), 784111777 / 86400);
}

TEST(CivilTime, CivilFromDaysInvertsDaysFromCivil) {
    // Every day from 1600 to 2400: leap years, century rules and the 400-year cycle.
    for (int64_t days = days_from_civil(1600, 1, 1); days <= days_from_civil(2400, 12, 31);
         ++days) {
        const CivilDate date = civil_from_days(days);
        ASSERT_EQ(days_from_civil(date.year, date.month, date.day), days) << days;
        ASSERT_GE(date.month, 1u);
        ASSERT_LE(date.month, 12u);
        ASSERT_GE(date.day, 1u);
        ASSERT_LE(date.day, 31u);
        ASSERT_EQ(date.weekday, unsigned(((days % 7) + 11) % 7)) << days;
    }
}

TEST(CivilTime, LeapDays) {
    EXPECT_EQ(civil_from_days(days_from_civil(2000, 2, 29)).day, 29u);      // divisible by 400
    EXPECT_EQ(civil_from_days(days_from_civil(1900, 2, 28) + 1).month, 3u); // by 100 only
    EXPECT_EQ(civil_from_days(days_from_civil(2024, 2, 28) + 1).day, 29u);
}

TEST(CivilTime, Weekdays) {
    EXPECT_EQ(kDayNames[civil_from_days(0).weekday], "Thu"); // 1970-01-01
    EXPECT_EQ(kDayNames[civil_from_days(-1).weekday], "Wed");
    EXPECT_EQ(kDayNames[civil_from_days(days_from_civil(1994, 11, 6)).weekday], "Sun");
}

TEST(CivilTime, ImfFixdate) {
    EXPECT_EQ(imf_fixdate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT"); // RFC 9110's example
    EXPECT_EQ(imf_fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    EXPECT_EQ(imf_fixdate(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
    EXPECT_EQ(imf_fixdate(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
    EXPECT_EQ(imf_fixdate(4102444799), "Thu, 31 Dec 2099 23:59:59 GMT");
}

TEST(CivilTime, NameTables) {
    EXPECT_EQ(kMonthNames.front(), "Jan");
    EXPECT_EQ(kMonthNames[10], "Nov");
    EXPECT_EQ(kMonthNames.back(), "Dec");
    EXPECT_EQ(kDayNames.front(), "Sun");
    EXPECT_EQ(kDayNames.back(), "Sat");
}

} // namespace
} // namespace lepus
