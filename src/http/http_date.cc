#include "http/http_date.h"

#include <cstdint>

namespace lepus {
namespace {

constexpr const char* kDayNames[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* kMonthNames[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil): avoids timegm(), which takes the libc timezone lock.
int64_t days_from_civil(int64_t year, unsigned month, unsigned day) {
    year -= month <= 2;
    const int64_t era = (year >= 0 ? year : year - 399) / 400;
    const unsigned year_of_era = unsigned(year - era * 400);
    const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    const unsigned day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + int64_t(day_of_era) - 719468;
}

void put2(char* out, unsigned value) {
    out[0] = char('0' + value / 10 % 10);
    out[1] = char('0' + value % 10);
}

// A tiny cursor over the date text; every reader fails softly by setting ok_ = false.
class DateReader {
public:
    explicit DateReader(std::string_view text) : text_(text) {}

    bool ok() const { return ok_ && pos_ == text_.size(); }

    void literal(std::string_view expected) {
        if (rest().substr(0, expected.size()) != expected) ok_ = false;
        pos_ += expected.size();
    }

    // Exactly `width` digits (width 0: one or more).
    unsigned number(size_t width) {
        unsigned value = 0;
        size_t count = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' &&
               (width == 0 || count < width) && count < 9) {
            value = value * 10 + unsigned(text_[pos_] - '0');
            ++pos_;
            ++count;
        }
        if (count == 0 || (width != 0 && count != width)) ok_ = false;
        return value;
    }

    // A three-letter month name -> 1..12.
    unsigned month() {
        std::string_view name = rest().substr(0, 3);
        pos_ += 3;
        for (unsigned i = 0; i < 12; ++i)
            if (name == kMonthNames[i]) return i + 1;
        ok_ = false;
        return 1;
    }

    // Skips a day name ("Sun" or "Sunday"); its value is redundant and not checked.
    void day_name() {
        size_t start = pos_;
        while (pos_ < text_.size() && ((text_[pos_] >= 'A' && text_[pos_] <= 'Z') ||
                                       (text_[pos_] >= 'a' && text_[pos_] <= 'z')))
            ++pos_;
        if (pos_ - start < 3) ok_ = false;
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

private:
    // What is left to read; empty once a failed read has moved past the end.
    std::string_view rest() const {
        return pos_ <= text_.size() ? text_.substr(pos_) : std::string_view{};
    }

    std::string_view text_;
    size_t pos_ = 0;
    bool ok_ = true;
};

std::optional<time_t> to_time(unsigned year, unsigned month, unsigned day, unsigned hour,
                              unsigned minute, unsigned second) {
    if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
    int64_t days = days_from_civil(year, month, day);
    return time_t(days * 86400 + hour * 3600 + minute * 60 + second);
}

} // namespace

void format_http_date(time_t t, char* out) {
    int64_t days = t / 86400;
    int64_t seconds = t % 86400;
    if (seconds < 0) {
        seconds += 86400;
        --days;
    }
    // civil_from_days (Hinnant), the inverse of days_from_civil.
    const int64_t z = days + 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned day_of_era = unsigned(z - era * 146097);
    const unsigned year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    const unsigned day_of_year =
        day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    const unsigned mp = (5 * day_of_year + 2) / 153;
    const unsigned day = day_of_year - (153 * mp + 2) / 5 + 1;
    const unsigned month = mp < 10 ? mp + 3 : mp - 9;
    const int64_t year = int64_t(year_of_era) + era * 400 + (month <= 2);
    const unsigned weekday = unsigned(((days % 7) + 11) % 7); // 1970-01-01 was a Thursday

    const char* name = kDayNames[weekday];
    out[0] = name[0], out[1] = name[1], out[2] = name[2], out[3] = ',', out[4] = ' ';
    put2(out + 5, day);
    out[7] = ' ';
    const char* month_name = kMonthNames[month - 1];
    out[8] = month_name[0], out[9] = month_name[1], out[10] = month_name[2], out[11] = ' ';
    put2(out + 12, unsigned(year / 100));
    put2(out + 14, unsigned(year % 100));
    out[16] = ' ';
    put2(out + 17, unsigned(seconds / 3600));
    out[19] = ':';
    put2(out + 20, unsigned(seconds / 60 % 60));
    out[22] = ':';
    put2(out + 23, unsigned(seconds % 60));
    out[25] = ' ', out[26] = 'G', out[27] = 'M', out[28] = 'T';
}

namespace {

// "08:49:37", shared by the three date forms.
struct Clock {
    unsigned hour, minute, second;
};
Clock read_clock(DateReader& r) {
    Clock clock;
    clock.hour = r.number(2);
    r.literal(":");
    clock.minute = r.number(2);
    r.literal(":");
    clock.second = r.number(2);
    return clock;
}

} // namespace

std::optional<time_t> parse_http_date(std::string_view text) {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    {
        DateReader r(text);
        r.day_name();
        r.literal(", ");
        unsigned day = r.number(2);
        r.literal(" ");
        unsigned month = r.month();
        r.literal(" ");
        unsigned year = r.number(4);
        r.literal(" ");
        auto [hour, minute, second] = read_clock(r);
        r.literal(" GMT");
        if (r.ok()) return to_time(year, month, day, hour, minute, second);
    }
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT". RFC 9110 §5.6.7: a two-digit year
    // more than 50 years in the future is in the past century; we take < 70 as 20xx.
    {
        DateReader r(text);
        r.day_name();
        r.literal(", ");
        unsigned day = r.number(2);
        r.literal("-");
        unsigned month = r.month();
        r.literal("-");
        unsigned year = r.number(2);
        r.literal(" ");
        auto [hour, minute, second] = read_clock(r);
        r.literal(" GMT");
        if (r.ok())
            return to_time(year < 70 ? 2000 + year : 1900 + year, month, day, hour, minute, second);
    }
    // asctime: "Sun Nov  6 08:49:37 1994"
    {
        DateReader r(text);
        r.day_name();
        r.literal(" ");
        unsigned month = r.month();
        r.literal(" ");
        if (r.peek() == ' ') r.literal(" ");
        unsigned day = r.number(0);
        r.literal(" ");
        auto [hour, minute, second] = read_clock(r);
        r.literal(" ");
        unsigned year = r.number(4);
        if (r.ok()) return to_time(year, month, day, hour, minute, second);
    }
    return std::nullopt;
}

} // namespace lepus
