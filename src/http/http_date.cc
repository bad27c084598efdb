#include "http/http_date.h"

#include <cstdint>

namespace lepus {
namespace {

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
    return time_t(days * 86400 + int64_t{hour} * 3600 + int64_t{minute} * 60 + second);
}

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
