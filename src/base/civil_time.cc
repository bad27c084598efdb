#include "base/civil_time.h"

namespace lepus {

namespace {

// Writes `value` % 100 as two decimal digits into out[0..2).
void put_two_digits(char* out, unsigned value) {
    out[0] = char('0' + value / 10 % 10);
    out[1] = char('0' + value % 10);
}

} // namespace

int64_t days_from_civil(int64_t year, unsigned month, unsigned day) {
    year -= month <= 2;
    const int64_t era = (year >= 0 ? year : year - 399) / 400;
    const auto year_of_era = unsigned(year - era * 400);
    const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    const unsigned day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + int64_t(day_of_era) - 719468;
}

CivilDate civil_from_days(int64_t days) {
    const int64_t z = days + 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto day_of_era = unsigned(z - era * 146097);
    const unsigned year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    const unsigned day_of_year =
        day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    const unsigned mp = (5 * day_of_year + 2) / 153;
    CivilDate date{};
    date.day = day_of_year - (153 * mp + 2) / 5 + 1;
    date.month = mp < 10 ? mp + 3 : mp - 9;
    date.year = int64_t(year_of_era) + era * 400 + (date.month <= 2);
    // 1970-01-01 was a Thursday (4); the double modulo keeps days before 1970 in 0..6.
    date.weekday = unsigned(((days % 7) + 11) % 7);
    return date;
}

void format_imf_fixdate(time_t t, char* out) {
    int64_t days = t / 86400;
    int64_t seconds = t % 86400;
    if (seconds < 0) {
        seconds += 86400;
        --days;
    }
    const CivilDate date = civil_from_days(days);
    const std::string_view day_name = kDayNames[date.weekday];
    const std::string_view month_name = kMonthNames[date.month - 1];
    out[0] = day_name[0], out[1] = day_name[1], out[2] = day_name[2], out[3] = ',', out[4] = ' ';
    put_two_digits(out + 5, date.day);
    out[7] = ' ';
    out[8] = month_name[0], out[9] = month_name[1], out[10] = month_name[2], out[11] = ' ';
    put_two_digits(out + 12, unsigned(date.year / 100));
    put_two_digits(out + 14, unsigned(date.year % 100));
    out[16] = ' ';
    put_two_digits(out + 17, unsigned(seconds / 3600));
    out[19] = ':';
    put_two_digits(out + 20, unsigned(seconds / 60 % 60));
    out[22] = ':';
    put_two_digits(out + 23, unsigned(seconds % 60));
    out[25] = ' ', out[26] = 'G', out[27] = 'M', out[28] = 'T';
}

} // namespace lepus
