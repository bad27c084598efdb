// ASCII case helpers for protocol tokens (header names, methods): locale-free,
// and only A-Z/a-z change case, so "@" and "`" stay apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lepus {

constexpr char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

constexpr char ascii_upper(char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}

constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}

// Without the optional white space (spaces and tabs) around a field value or
// list element (RFC 9110 §5.6.3).
constexpr std::string_view trim_ows(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
        text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
    return text;
}

// Lowercases the bytes of a word at once: per byte, on its low seven bits
// (no carry crosses into the next byte), the high bit of the first sum says
// ">= 'A'" and that of the second "> 'Z'"; upper case is one without the
// other, in an ASCII byte (high bit clear). Bytes past 0x7f stay as they are.
template <typename Word> constexpr Word ascii_lower_word(Word word) {
    constexpr Word kOnes = Word(~Word(0)) / 0xff; // 0x0101...
    constexpr Word kHighBits = kOnes * 0x80;
    Word low7 = word & ~kHighBits;
    Word at_least_a = low7 + (0x80 - 'A') * kOnes;
    Word above_z = low7 + (0x7f - 'Z') * kOnes;
    Word upper = (at_least_a ^ above_z) & ~word & kHighBits;
    return word | (upper >> 2); // 0x80 >> 2 is 0x20, the case bit
}

template <typename Word> inline void ascii_lower_word_at(char* text) {
    Word word;
    std::memcpy(&word, text, sizeof word);
    word = ascii_lower_word(word);
    std::memcpy(text, &word, sizeof word);
}

// Lowercases `size` bytes in place, a word at a time: HTTP/2 sends every
// response header name lowercased (RFC 9113 §8.2.1), and a byte loop cost
// about nine instructions a character. The last word may overlap the one
// before it: lowercasing a byte twice is lowercasing it once.
inline void ascii_lower_in_place(char* text, size_t size) {
    if (size >= 8) {
        char* last = text + size - 8;
        for (; text < last; text += 8)
            ascii_lower_word_at<uint64_t>(text);
        ascii_lower_word_at<uint64_t>(last);
    } else if (size >= 4) {
        ascii_lower_word_at<uint32_t>(text);
        ascii_lower_word_at<uint32_t>(text + size - 4);
    } else {
        for (; size > 0; ++text, --size)
            *text = ascii_lower(*text);
    }
}

} // namespace lepus
