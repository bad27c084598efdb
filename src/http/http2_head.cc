#include "http/detail/http2_head.h"

#include "base/ascii.h"
#include "base/time_cache.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace lepus::detail {

namespace {

using namespace std::string_view_literals;

// Fields that are HTTP/1.1 connection management, never sent on HTTP/2
// (RFC 9113 §8.2.2). `name` is lowercase already.
bool is_connection_field(std::string_view name) {
    switch (name.size()) {
    case 2:
        return name == "te"sv;
    case 7:
        return name == "upgrade"sv;
    case 10:
        return name == "connection"sv || name == "keep-alive"sv;
    case 16:
        return name == "proxy-connection"sv;
    case 17:
        return name == "transfer-encoding"sv;
    default:
        return false;
    }
}

// Pointers into the head and its text, never copies; see head_to_fields for the lifetime.
HeadField field(const char* name, size_t name_size, const char* value, size_t value_size) {
    return HeadField{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(value)), name_size, value_size};
}

constexpr size_t kDigitsMax = 24; // a uint64_t in decimal, with room to spare

} // namespace

// The head is a structure: no line to find, no colon to look for, no value to
// trim (the text parse this replaced cost 1,750 instructions a response of
// about 25,400 under callgrind, h2 over TLS, a 612-byte page).
void head_to_fields(const ResponseHead& head, time_t now, HeadText& text,
                    std::vector<HeadField>& fields) {
    size_t names = 0;
    head.for_each([&](std::string_view name, std::string_view) { names += name.size(); });
    char* at = text.room(names + kImfFixdateLength + 2 * kDigitsMax);
    // Written by index, not push_back (its capacity check and call per
    // field), then cut to what was written.
    fields.resize(head.field_count() + 4);
    HeadField* out = fields.data();

    char* status = at;
    at = std::to_chars(at, at + kDigitsMax, head.status).ptr;
    *out++ = field(":status", 7, status, size_t(at - status));
    // Copied: the per-second cache changes under a head that waits (HTTP/3).
    std::string_view date = cached_http_date(now);
    char* date_at = at;
    at = std::copy(date.begin(), date.end(), at);
    *out++ = field("date", 4, date_at, date.size());
    *out++ = field("server", 6, "lepus", 5);

    head.for_each([&](std::string_view name, std::string_view value) {
        std::memcpy(at, name.data(), name.size());
        ascii_lower_in_place(at, name.size());
        if (is_connection_field({at, name.size()})) return;
        *out++ = field(at, name.size(), value.data(), value.size());
        at += name.size();
    });
    if (head.content_length) {
        char* length = at;
        at = std::to_chars(at, at + kDigitsMax, *head.content_length).ptr;
        *out++ = field("content-length", 14, length, size_t(at - length));
    }
    fields.resize(size_t(out - fields.data()));
}

} // namespace lepus::detail
