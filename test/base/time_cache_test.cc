// The time cache formats each form at most once per second per thread. That is observable
// from outside: a change of time zone shows only when the second (or the thread) changes.
#include "base/time_cache.h"

#include <cstdlib>
#include <ctime>
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <thread>

namespace lepus {
namespace {

constexpr time_t kNovember6 = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT

// Sets TZ for the object's lifetime. localtime_r reads TZ only after tzset() (glibc calls
// it for localtime, not for localtime_r), hence the explicit calls.
class ScopedTimeZone {
public:
    explicit ScopedTimeZone(const char* zone) {
        if (const char* old = std::getenv("TZ")) saved_ = old;
        set(zone);
    }
    ~ScopedTimeZone() { set(saved_ ? saved_->c_str() : nullptr); }
    ScopedTimeZone(const ScopedTimeZone&) = delete;
    ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;

    static void set(const char* zone) {
        if (zone != nullptr) {
            setenv("TZ", zone, 1);
        } else {
            unsetenv("TZ");
        }
        tzset();
    }

private:
    std::optional<std::string> saved_;
};

// Each test uses seconds of its own: the caches are per thread and outlive a test.

TEST(TimeCache, HttpDateIsImfFixdate) {
    EXPECT_EQ(cached_http_date(kNovember6), "Sun, 06 Nov 1994 08:49:37 GMT");
    EXPECT_EQ(cached_http_date(kNovember6), "Sun, 06 Nov 1994 08:49:37 GMT");
    EXPECT_EQ(cached_http_date(kNovember6 + 1), "Sun, 06 Nov 1994 08:49:38 GMT");
    EXPECT_EQ(cached_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
}

TEST(TimeCache, AccessLogTimeIsFormattedOncePerSecond) {
    const time_t second = kNovember6 + 10;
    ScopedTimeZone utc("UTC0");
    EXPECT_EQ(cached_access_log_time(second), "06/Nov/1994:08:49:47 +0000");
    ScopedTimeZone::set("UTC-1"); // POSIX sign: one hour east of UTC, +0100
    EXPECT_EQ(cached_access_log_time(second), "06/Nov/1994:08:49:47 +0000"); // cached
    EXPECT_EQ(cached_access_log_time(second + 1), "06/Nov/1994:09:49:48 +0100");
}

TEST(TimeCache, AccessLogTimeWestOfUtc) {
    ScopedTimeZone zone("XYZ5:30"); // five and a half hours west: -0530
    EXPECT_EQ(cached_access_log_time(kNovember6 + 20), "06/Nov/1994:03:19:57 -0530");
}

TEST(TimeCache, ErrorLogTimeIsFormattedOncePerSecond) {
    const time_t second = kNovember6 + 30;
    ScopedTimeZone zone("XYZ5");
    EXPECT_EQ(cached_error_log_time(second), "1994/11/06 03:50:07");
    ScopedTimeZone::set("UTC0");
    EXPECT_EQ(cached_error_log_time(second), "1994/11/06 03:50:07"); // cached
    EXPECT_EQ(cached_error_log_time(second + 1), "1994/11/06 08:50:08");
}

TEST(TimeCache, FormsKeepTheirOwnSecond) {
    // A reactor's "now" and the wall clock of a log call may differ by a second; asking
    // for one form must not throw away the other's text.
    const time_t log_second = kNovember6 + 40;
    ScopedTimeZone zone("UTC0");
    EXPECT_EQ(cached_error_log_time(log_second), "1994/11/06 08:50:17");
    ScopedTimeZone::set("UTC-2");
    EXPECT_EQ(cached_http_date(log_second + 5), "Sun, 06 Nov 1994 08:50:22 GMT");
    EXPECT_EQ(cached_access_log_time(log_second + 5), "06/Nov/1994:10:50:22 +0200");
    EXPECT_EQ(cached_error_log_time(log_second), "1994/11/06 08:50:17"); // still cached
}

TEST(TimeCache, EachThreadHasItsOwnCache) {
    const time_t second = kNovember6 + 50;
    ScopedTimeZone zone("UTC0");
    EXPECT_EQ(cached_access_log_time(second), "06/Nov/1994:08:50:27 +0000");
    ScopedTimeZone::set("UTC-1");
    std::string other_thread;
    std::thread([&] { other_thread = std::string(cached_access_log_time(second)); }).join();
    EXPECT_EQ(other_thread, "06/Nov/1994:09:50:27 +0100"); // formatted afresh there
    EXPECT_EQ(cached_access_log_time(second), "06/Nov/1994:08:50:27 +0000"); // ours kept
}

} // namespace
} // namespace lepus
