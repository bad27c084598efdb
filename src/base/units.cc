#include "base/units.h"

#include <cctype>
#include <limits>

namespace lepus {
namespace {

struct NumberAndUnit {
    uint64_t number;
    std::string_view unit;
};

// Splits "123abc" into 123 and "abc"; nullopt unless it starts with a digit
// or when the number overflows.
std::optional<NumberAndUnit> split_number(std::string_view text) {
    size_t i = 0;
    uint64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        uint64_t digit = text[i] - '0';
        if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
        ++i;
    }
    if (i == 0) return std::nullopt;
    return NumberAndUnit{value, text.substr(i)};
}

std::optional<uint64_t> multiply(uint64_t value, uint64_t factor) {
    if (factor != 0 && value > std::numeric_limits<uint64_t>::max() / factor) return std::nullopt;
    return value * factor;
}

bool equals_lower(std::string_view text, std::string_view lower) {
    if (text.size() != lower.size()) return false;
    for (size_t i = 0; i < text.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(text[i])) != lower[i]) return false;
    return true;
}

} // namespace

std::optional<uint64_t> parse_duration_ms(std::string_view text) {
    auto parts = split_number(text);
    if (!parts) return std::nullopt;
    std::string_view unit = parts->unit;
    uint64_t factor;
    if (unit.empty() || unit == "s")
        factor = 1000;
    else if (unit == "ms")
        factor = 1;
    else if (unit == "m")
        factor = uint64_t{60} * 1000;
    else if (unit == "h")
        factor = uint64_t{3600} * 1000;
    else
        return std::nullopt;
    return multiply(parts->number, factor);
}

std::optional<uint64_t> parse_size(std::string_view text) {
    auto parts = split_number(text);
    if (!parts) return std::nullopt;
    std::string_view unit = parts->unit;
    uint64_t factor;
    if (unit.empty() || equals_lower(unit, "b"))
        factor = 1;
    else if (equals_lower(unit, "k") || equals_lower(unit, "kb") || equals_lower(unit, "kib"))
        factor = uint64_t{1} << 10;
    else if (equals_lower(unit, "m") || equals_lower(unit, "mb") || equals_lower(unit, "mib"))
        factor = uint64_t{1} << 20;
    else if (equals_lower(unit, "g") || equals_lower(unit, "gb") || equals_lower(unit, "gib"))
        factor = uint64_t{1} << 30;
    else
        return std::nullopt;
    return multiply(parts->number, factor);
}

} // namespace lepus
