#include "http/http_date.h"

#include <ctime>
#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

std::string format(time_t t) {
    char buffer[kHttpDateLength];
    format_http_date(t, buffer);
    return std::string(buffer, kHttpDateLength);
}

TEST(HttpDate, FormatsImfFixdate) {
    EXPECT_EQ(format(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    EXPECT_EQ(format(784111777), "Sun, 06 Nov 1994 08:49:37 GMT"); // RFC 9110's example
    EXPECT_EQ(format(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
    EXPECT_EQ(format(4102444799), "Thu, 31 Dec 2099 23:59:59 GMT");
}

TEST(HttpDate, AgreesWithGmtime) {
    for (time_t t = 0; t < 5'000'000'000; t += 86'400 * 7 + 3'607) {
        struct tm tm;
        gmtime_r(&t, &tm);
        char expected[64];
        strftime(expected, sizeof expected, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        ASSERT_EQ(format(t), expected) << t;
        ASSERT_EQ(parse_http_date(expected), std::optional<time_t>(t)) << expected;
    }
}

TEST(HttpDate, ParsesTheThreeForms) {
    EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
    EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
    EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777);
    EXPECT_EQ(parse_http_date("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86400);
}

TEST(HttpDate, RejectsGarbage) {
    const char* bad[] = {"",
                         "yesterday",
                         "Sun, 06 Nov 1994 08:49:37",
                         "Sun, 06 Nov 1994 08:49:37 UTC",
                         "Sun, 06 Foo 1994 08:49:37 GMT",
                         "Sun, 6 Nov 1994 08:49:37 GMT",
                         "Sun, 06 Nov 1994 25:49:37 GMT",
                         "Sun, 00 Nov 1994 08:49:37 GMT",
                         "Sun, 06 Nov 1994 08:49:37 GMT trailing",
                         "Sun, 06 Nov 94",
                         "S"};
    for (const char* text : bad)
        EXPECT_FALSE(parse_http_date(text).has_value()) << text;
}

} // namespace
} // namespace lepus
