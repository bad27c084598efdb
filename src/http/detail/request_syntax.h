// Internal header of the request parser (request_parser.cc, request_head.cc):
// the byte classes of RFC 9110/9112 and the small scanners over them, inline
// because the parser's hot loops call them once per byte. Not for other users.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lepus::detail {

// Byte classes, one table lookup per byte in the hot loops.
constexpr uint8_t kTokenByte = 1;  // tchar (RFC 9110 §5.6.2)
constexpr uint8_t kTargetByte = 2; // plain request-target byte (RFC 3986 pchar but '%', and "/")
constexpr uint8_t kValueByte = 4;  // field-vchar, obs-text, SP, HTAB (RFC 9110 §5.5)
constexpr uint8_t kHostByte = 8;   // reg-name: unreserved / sub-delims (RFC 3986 §3.2.2)

constexpr std::array<uint8_t, 256> make_byte_classes() {
    std::array<uint8_t, 256> table{};
    auto add = [&table](std::string_view chars, uint8_t cls) {
        for (char c : chars)
            table[static_cast<uint8_t>(c)] |= cls;
    };
    constexpr std::string_view alnum =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    add(alnum, kTokenByte | kTargetByte | kHostByte);
    add("!#$%&'*+-.^_`|~", kTokenByte);
    add("-._~!$&'()*+,;=:@/", kTargetByte); // and '?', '%', '[', ']', '"', handled apart
    // Not in RFC 3986, but sent raw by browsers and tools (WHATWG URL leaves them
    // unencoded; curl sends what it is given), and accepted by nginx 1.22 in the
    // path and the query (issue 14). None of them can end the request line, so
    // accepting them opens no smuggling; the path is percent-decoded and normalised
    // as usual afterwards, and '\\' is no separator on Linux.
    add("|^{}\\`", kTargetByte);
    add("-._~!$&'()*+,;=", kHostByte);
    for (int c = 0x21; c <= 0x7e; ++c)
        table[c] |= kValueByte;
    for (int c = 0x80; c <= 0xff; ++c)
        table[c] |= kValueByte;
    table[' '] |= kValueByte;
    table['\t'] |= kValueByte;
    return table;
}

constexpr std::array<uint8_t, 256> kByteClass = make_byte_classes();

inline bool has_class(char c, uint8_t cls) {
    return kByteClass[static_cast<uint8_t>(c)] & cls;
}
inline bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
inline bool is_hex(char c) {
    return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}
inline bool is_ows(char c) {
    return c == ' ' || c == '\t';
}

// Advances over bytes of class cls from p; returns the first other byte's offset, or
// end. Unrolled by four: for short runs (names, paths) the loop overhead is the cost.
[[gnu::always_inline]] inline size_t skip_class(const char* buf, size_t p, size_t end,
                                                uint8_t cls) {
    while (end - p >= 4 && has_class(buf[p], cls) && has_class(buf[p + 1], cls) &&
           has_class(buf[p + 2], cls) && has_class(buf[p + 3], cls))
        p += 4;
    while (p < end && has_class(buf[p], cls))
        ++p;
    return p;
}

// Advances over field-value bytes (RFC 9110 §5.5) from p; returns the first other byte's
// offset, or end. Values are most of a request head (User-Agent, cookies), so with SSE2
// (every x86-64) 16 bytes are checked at a time for a control byte or DEL.
inline size_t skip_value_bytes(const char* buf, size_t p, size_t end) {
#if defined(__SSE2__)
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + p));
        __m128i printable = _mm_cmpeq_epi8(_mm_max_epu8(v, space), v); // unsigned v >= 0x20
        unsigned stop = ~_mm_movemask_epi8(printable) & 0xffff;
        stop |= _mm_movemask_epi8(_mm_cmpeq_epi8(v, del));
        if (stop == 0) {
            p += 16;
            continue;
        }
        p += __builtin_ctz(stop);
        if (buf[p] != '\t') return p; // HTAB is the one control byte a value may hold
        ++p;
    }
#endif
    while (p < end && has_class(buf[p], kValueByte))
        ++p;
    return p;
}

// Case-insensitive comparison with a lowercase literal, eight bytes at a time. `text`
// holds token or field-value bytes (no control bytes), for which OR-ing 0x20 folds
// only letters into a match.
inline bool equals_lower(std::string_view text, std::string_view lower) {
    if (text.size() != lower.size()) return false;
    size_t i = 0;
    for (; i + 8 <= text.size(); i += 8) {
        uint64_t a, b;
        std::memcpy(&a, text.data() + i, 8);
        std::memcpy(&b, lower.data() + i, 8);
        if ((a | 0x2020202020202020u) != b) return false;
    }
    for (; i < text.size(); ++i)
        if ((text[i] | 0x20) != lower[i]) return false;
    return true;
}

inline std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && is_ows(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_ows(s.back()))
        s.remove_suffix(1);
    return s;
}

// Calls fn(element) for each non-empty element of a comma-separated list; RFC 9110
// §5.6.1 asks recipients to ignore empty elements.
template <class Fn> void for_each_element(std::string_view list, Fn fn) {
    while (!list.empty()) {
        size_t comma = list.find(',');
        std::string_view element = trim_ows(list.substr(0, comma));
        if (!element.empty()) fn(element);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
}

inline std::string_view view_of(const char* buf, size_t offset, size_t size) {
    return {buf + offset, size};
}

inline bool starts_with_lower(std::string_view text, std::string_view lower) {
    return text.size() >= lower.size() && equals_lower(text.substr(0, lower.size()), lower);
}

} // namespace lepus::detail
