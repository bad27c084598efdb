#include "log/log_escape.h"

#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lepus {
namespace {

constexpr char kHexDigits[] = "0123456789ABCDEF";

// A table, because the access log runs this on every byte of every line.
constexpr auto kNeedsEscape = [] {
    std::array<bool, 256> table{};
    for (int c = 0; c < 256; ++c) {
        table[size_t(c)] = c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
    }
    return table;
}();

char* write_escaped_byte(unsigned char c, char* out) {
    out[0] = '\\';
    out[1] = 'x';
    out[2] = kHexDigits[c >> 4];
    out[3] = kHexDigits[c & 0xf];
    return out + 4;
}

} // namespace

char* write_log_escaped(std::string_view text, char* out) {
    const char* at = text.data();
    const char* end = at + text.size();
#if defined(__SSE2__)
    // Sixteen bytes a step: a request target or a user agent seldom has a byte
    // to escape, and the byte loop below was a fifth of an HTTP/1.1 keepalive
    // request's instructions with the access log on (callgrind).
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i del = _mm_set1_epi8(0x7f);
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    while (end - at >= 16) {
        __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
        // Signed: below 0x20 and from 0x80 on are both "less than 0x20".
        __m128i escape = _mm_cmplt_epi8(bytes, space);
        escape = _mm_or_si128(escape, _mm_cmpeq_epi8(bytes, del));
        escape = _mm_or_si128(escape, _mm_cmpeq_epi8(bytes, quote));
        escape = _mm_or_si128(escape, _mm_cmpeq_epi8(bytes, backslash));
        auto mask = unsigned(_mm_movemask_epi8(escape));
        if (mask == 0) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
            at += 16;
            out += 16;
            continue;
        }
        auto clean = size_t(__builtin_ctz(mask));
        std::memcpy(out, at, clean);
        out = write_escaped_byte(static_cast<unsigned char>(at[clean]), out + clean);
        at += clean + 1;
    }
#endif
    for (; at < end; ++at) {
        const auto c = static_cast<unsigned char>(*at);
        if (kNeedsEscape[c])
            out = write_escaped_byte(c, out);
        else
            *out++ = char(c);
    }
    return out;
}

void append_log_escaped(std::string_view text, std::string& out) {
    size_t start = out.size();
    out.resize(start + log_escaped_bound(text.size()));
    char* end = write_log_escaped(text, out.data() + start);
    out.resize(size_t(end - out.data()));
}

} // namespace lepus
