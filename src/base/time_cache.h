// The text forms of "now" that responses and log lines carry, each formatted at most once
// per second per thread (nginx ngx_time_update, lwan update_date_cache). Per thread, so no
// lock: every reactor and the logger keep their own copy. Each form has its own second,
// so callers that pass slightly different clocks (a reactor's cached "now" against the
// wall clock of a log call) do not make each other reformat.
//
// The views stay valid until the same thread asks for the same form with another second.
// Nothing here allocates: the texts live in fixed thread-local buffers.
#pragma once

#include "base/civil_time.h"

#include <ctime>
#include <string_view>

namespace lepus {

// `now` (seconds since the epoch) as IMF-fixdate, for Date: "Sun, 06 Nov 1994 08:49:37 GMT".
// Inline below: it runs once per response.
std::string_view cached_http_date(time_t now);

// `now` in local time for the access log (Common Log Format): "22/Nov/2026:12:34:56 +0100".
std::string_view cached_access_log_time(time_t now);

// `now` in local time for the error log (nginx's form): "2026/11/22 12:34:56".
std::string_view cached_error_log_time(time_t now);

namespace detail {

// The Date text and its second. constinit: the compiler then knows no dynamic
// initialisation is needed and reads the variable directly, without a TLS wrapper call.
struct HttpDateCache {
    time_t second = -1;
    char text[kImfFixdateLength] = {};
};
extern constinit thread_local HttpDateCache t_http_date;

// Formats `now` into t_http_date and returns it.
std::string_view refresh_http_date(time_t now);

} // namespace detail

inline std::string_view cached_http_date(time_t now) {
    if (now == detail::t_http_date.second) return {detail::t_http_date.text, kImfFixdateLength};
    return detail::refresh_http_date(now);
}

} // namespace lepus
