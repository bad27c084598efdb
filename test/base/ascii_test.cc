// ASCII case helpers: ascii_lower_in_place against the byte-at-a-time
// ascii_lower on every byte value, at every length and alignment a header
// name can have, and the protocol rules ("@", "[", "`" and bytes past 0x7f
// keep their case).
#include "base/ascii.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

TEST(Ascii, LowerInPlaceMatchesTheByteLoopOnEveryByte) {
    // Every byte value in every position of an 8-byte word, then a tail.
    std::string all;
    for (int c = 0; c < 256; ++c)
        all.push_back(static_cast<char>(c));
    for (size_t shift = 0; shift < 8; ++shift) {
        std::string text = all.substr(shift) + all.substr(0, shift) + "ABC";
        std::string expected = text;
        for (char& c : expected)
            c = ascii_lower(c);
        ascii_lower_in_place(text.data(), text.size());
        EXPECT_EQ(text, expected) << "shift " << shift;
    }
}

TEST(Ascii, LowerInPlaceAtEveryLengthAndAlignment) {
    const std::string name = "X-Custom-HEADER-Name_With^Odd`Chars@[Z]";
    for (size_t at = 0; at < 8; ++at) {
        for (size_t size = 0; size + at <= name.size(); ++size) {
            std::string text = name;
            ascii_lower_in_place(text.data() + at, size);
            std::string expected = name;
            for (size_t i = at; i < at + size; ++i)
                expected[i] = ascii_lower(expected[i]);
            EXPECT_EQ(text, expected) << "at " << at << " size " << size;
        }
    }
}

TEST(Ascii, OnlyLettersChangeCase) {
    std::string text = "Content-Type@[`]{}\x80\xC0\xDA";
    ascii_lower_in_place(text.data(), text.size());
    EXPECT_EQ(text, "content-type@[`]{}\x80\xC0\xDA");
}

} // namespace
} // namespace lepus
