#include "log/access_log.h"

#include <cstdlib>
#include <ctime>
#include <gtest/gtest.h>
#include <thread>

namespace lepus {
namespace {

// The access log prints local time, like nginx; the tests pin the zone.
void set_time_zone(const char* zone) {
    ::setenv("TZ", zone, 1);
    ::tzset();
}

constexpr time_t k20261122_123456_utc = 1795350896;

TEST(AccessLog, FormatsACombinedLine) {
    set_time_zone("UTC");
    AccessLogEntry entry{.remote_addr = "127.0.0.1",
                         .time = k20261122_123456_utc,
                         .method = "GET",
                         .target = "/x",
                         .protocol = "HTTP/1.1",
                         .status = 200,
                         .bytes_sent = 612,
                         .referer = "http://example.com/",
                         .user_agent = "curl/7.88.1"};
    std::string out = "previous\n";
    append_combined_line(entry, out);
    EXPECT_EQ(out, "previous\n127.0.0.1 - - [22/Nov/2026:12:34:56 +0000] \"GET /x HTTP/1.1\" 200 "
                   "612 \"http://example.com/\" \"curl/7.88.1\"\n");
}

TEST(AccessLog, EscapesQuotesBackslashesAndControlBytesAsNginx) {
    set_time_zone("UTC");
    AccessLogEntry entry{.remote_addr = "::1",
                         .time = k20261122_123456_utc + 1,
                         .method = "GET",
                         .target = "/a\"b",
                         .protocol = "HTTP/1.0",
                         .status = 404,
                         .bytes_sent = 0,
                         .referer = "",
                         .user_agent = "evil\"\n\\agent\x7f\xc3\xa9"};
    std::string out;
    append_combined_line(entry, out);
    EXPECT_EQ(out, "::1 - - [22/Nov/2026:12:34:57 +0000] \"GET /a\\x22b HTTP/1.0\" 404 0 \"-\" "
                   "\"evil\\x22\\x0A\\x5Cagent\\x7F\\xC3\\xA9\"\n");
}

TEST(AccessLog, EmptyFieldsPrintDash) {
    set_time_zone("UTC");
    AccessLogEntry entry{.remote_addr = "10.0.0.1",
                         .time = k20261122_123456_utc + 2,
                         .method = "",
                         .target = "",
                         .protocol = "",
                         .status = 400,
                         .bytes_sent = 150,
                         .referer = "",
                         .user_agent = ""};
    std::string out;
    append_combined_line(entry, out);
    EXPECT_EQ(out, "10.0.0.1 - - [22/Nov/2026:12:34:58 +0000] \"-\" 400 150 \"-\" \"-\"\n");
}

TEST(AccessLog, PrintsTheLocalOffset) {
    set_time_zone("EST5"); // POSIX: five hours west of UTC, no daylight saving
    AccessLogEntry entry{.remote_addr = "127.0.0.1",
                         .time = k20261122_123456_utc + 3,
                         .method = "HEAD",
                         .target = "/",
                         .protocol = "HTTP/1.1",
                         .status = 304,
                         .bytes_sent = 18446744073709551615ull,
                         .referer = "r",
                         .user_agent = "u"};
    std::string out;
    append_combined_line(entry, out);
    set_time_zone("UTC");
    EXPECT_EQ(out, "127.0.0.1 - - [22/Nov/2026:07:34:59 -0500] \"HEAD / HTTP/1.1\" 304 "
                   "18446744073709551615 \"r\" \"u\"\n");
}

TEST(AccessLog, TheSameSecondFromAnotherThreadFormatsTheSame) {
    set_time_zone("UTC");
    AccessLogEntry entry{.remote_addr = "127.0.0.1",
                         .time = k20261122_123456_utc,
                         .method = "GET",
                         .target = "/",
                         .protocol = "HTTP/1.1",
                         .status = 200,
                         .bytes_sent = 1,
                         .referer = "",
                         .user_agent = ""};
    std::string here, there;
    append_combined_line(entry, here);
    std::thread([&] { append_combined_line(entry, there); }).join();
    EXPECT_EQ(here, there);
    EXPECT_NE(here.find("[22/Nov/2026:12:34:56 +0000]"), std::string::npos);
}

} // namespace
} // namespace lepus
