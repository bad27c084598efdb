#include "log/log_escape.h"

#include <array>
#include <cstddef>

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

} // namespace

void append_log_escaped(std::string_view text, std::string& out) {
    size_t clean_start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!kNeedsEscape[c]) continue;
        out.append(text.data() + clean_start, i - clean_start);
        const char escaped[4] = {'\\', 'x', kHexDigits[c >> 4], kHexDigits[c & 0xf]};
        out.append(escaped, sizeof escaped);
        clean_start = i + 1;
    }
    out.append(text.data() + clean_start, text.size() - clean_start);
}

} // namespace lepus
