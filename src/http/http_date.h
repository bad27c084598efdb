// HTTP-date (RFC 9110 §5.6.7): formatting as IMF-fixdate and parsing of the
// three forms a recipient must accept.
#pragma once

#include "base/civil_time.h"

#include <ctime>
#include <optional>
#include <string_view>

namespace lepus {

// Length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
inline constexpr size_t kHttpDateLength = kImfFixdateLength;

// Writes `t` (seconds since the epoch, UTC) as IMF-fixdate into out[0..29). The Date of
// "now" comes from cached_http_date() (base/time_cache.h), formatted once per second.
inline void format_http_date(time_t t, char* out) {
    format_imf_fixdate(t, out);
}

// Parses IMF-fixdate, the obsolete RFC 850 form ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime ("Sun Nov  6 08:49:37 1994"); nullopt when the text is none of them.
std::optional<time_t> parse_http_date(std::string_view text);

} // namespace lepus
