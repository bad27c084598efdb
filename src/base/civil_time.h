// Calendar arithmetic on the proleptic Gregorian calendar, and the one table of English
// month and day names. Pure functions: no libc timezone lock (timegm, gmtime_r take it)
// and no LC_TIME (strftime's %b and %a follow the locale; HTTP and the logs do not).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>

namespace lepus {

// "Jan" .. "Dec": index 0 is January.
inline constexpr std::array<std::string_view, 12> kMonthNames = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// "Sun" .. "Sat": index 0 is Sunday, as tm_wday.
inline constexpr std::array<std::string_view, 7> kDayNames = {"Sun", "Mon", "Tue", "Wed",
                                                              "Thu", "Fri", "Sat"};

// A day of the calendar: month 1..12, day 1..31, weekday 0..6 (0 = Sunday).
struct CivilDate {
    int64_t year;
    unsigned month;
    unsigned day;
    unsigned weekday;
};

// Days since 1970-01-01 of year-month-day (month 1..12); Howard Hinnant's days_from_civil.
int64_t days_from_civil(int64_t year, unsigned month, unsigned day);

// The date `days` days after 1970-01-01 (negative: before); the inverse of days_from_civil.
CivilDate civil_from_days(int64_t days);

// Length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
inline constexpr size_t kImfFixdateLength = 29;

// Writes `t` (seconds since the epoch, UTC) as IMF-fixdate (RFC 9110 §5.6.7) into
// out[0..kImfFixdateLength); no terminating NUL.
void format_imf_fixdate(time_t t, char* out);

} // namespace lepus
