#include "base/time_cache.h"

#include "base/civil_time.h"

#include <cstdio>
#include <cstdlib>

namespace lepus {

namespace {

// One cached text form: the second it shows and its bytes.
template <size_t Capacity> struct CachedText {
    time_t second = -1;
    size_t length = 0;
    char text[Capacity]{};

    std::string_view view() const { return {text, length}; }
    // Stores what snprintf returned: a negative or oversized result keeps an empty text.
    void set_length(int written) {
        length = written > 0 && size_t(written) < Capacity ? size_t(written) : 0;
    }
};

thread_local CachedText<40> t_access_log_time;
thread_local CachedText<32> t_error_log_time;

// localtime_r reads the zone and takes libc's timezone lock: once per second per thread,
// shared by the two local-time forms.
const tm& local_time(time_t now) {
    thread_local time_t cached_second = -1;
    thread_local tm cached{};
    if (now != cached_second) {
        localtime_r(&now, &cached);
        cached_second = now;
    }
    return cached;
}

} // namespace

constinit thread_local detail::HttpDateCache detail::t_http_date;

std::string_view detail::refresh_http_date(time_t now) {
    format_imf_fixdate(now, t_http_date.text);
    t_http_date.second = now;
    return {t_http_date.text, kImfFixdateLength};
}

std::string_view cached_access_log_time(time_t now) {
    CachedText<40>& cache = t_access_log_time;
    if (now != cache.second) {
        const tm& local = local_time(now);
        const long offset_minutes = local.tm_gmtoff / 60;
        const long offset_abs = std::labs(offset_minutes);
        // The month by name from our table: strftime's %b would follow LC_TIME, and the
        // log format is always English, as in nginx.
        cache.set_length(std::snprintf(
            cache.text, sizeof cache.text, "%02d/%.3s/%04d:%02d:%02d:%02d %c%02ld%02ld",
            local.tm_mday, kMonthNames[size_t(local.tm_mon)].data(), local.tm_year + 1900,
            local.tm_hour, local.tm_min, local.tm_sec, offset_minutes < 0 ? '-' : '+',
            offset_abs / 60, offset_abs % 60));
        cache.second = now;
    }
    return cache.view();
}

std::string_view cached_error_log_time(time_t now) {
    CachedText<32>& cache = t_error_log_time;
    if (now != cache.second) {
        const tm& local = local_time(now);
        cache.set_length(std::snprintf(
            cache.text, sizeof cache.text, "%04d/%02d/%02d %02d:%02d:%02d", local.tm_year + 1900,
            local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec));
        cache.second = now;
    }
    return cache.view();
}

} // namespace lepus
