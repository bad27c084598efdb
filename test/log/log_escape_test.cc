// Log escaping: write_log_escaped (sixteen bytes a step where it can) against
// a byte-at-a-time reference, for every byte value at every position of texts
// around the 16-byte step, and append_log_escaped leaving exactly the
// escaped text after what `out` held.
#include "log/log_escape.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

std::string reference_escape(std::string_view text) {
    std::string out;
    for (char byte : text) {
        auto c = static_cast<unsigned char>(byte);
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7f) {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            out += hex;
        } else {
            out += byte;
        }
    }
    return out;
}

std::string escaped(std::string_view text) {
    std::string out(log_escaped_bound(text.size()), '?');
    out.resize(size_t(write_log_escaped(text, out.data()) - out.data()));
    return out;
}

TEST(LogEscape, EveryByteAtEveryPositionAroundTheSixteenByteStep) {
    for (size_t size : {1, 15, 16, 17, 31, 32, 33, 47, 64}) {
        for (size_t at = 0; at < size; ++at) {
            for (int c = 0; c < 256; ++c) {
                std::string text(size, 'a');
                text[at] = static_cast<char>(c);
                ASSERT_EQ(escaped(text), reference_escape(text))
                    << "size " << size << " byte " << c << " at " << at;
            }
        }
    }
}

TEST(LogEscape, RunsOfBytesToEscapeAndCleanText) {
    std::string text = "GET /a\"b\\c\x01\x7f\xff/" + std::string(40, 'x') + "\x1b[31m" +
                       std::string(17, '"') + "end";
    EXPECT_EQ(escaped(text), reference_escape(text));
    EXPECT_EQ(escaped(""), "");
}

TEST(LogEscape, AppendKeepsWhatWasThere) {
    std::string out = "before ";
    append_log_escaped("a\"b", out);
    EXPECT_EQ(out, "before a\\x22b");
}

} // namespace
} // namespace lepus
