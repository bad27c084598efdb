// Parsers for the durations and sizes that flags and the config file take.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lepus {

// "30" (seconds), "500ms", "10s", "2m", "1h" -> milliseconds. Rejects empty,
// negative, fractional or unknown units, and overflow.
std::optional<uint64_t> parse_duration_ms(std::string_view text);

// "4096" (bytes), "64k", "1m", "1g" (powers of 1024, either case, optional
// trailing "b" or "ib" as in "64KiB") -> bytes. Rejects what parse_duration_ms rejects.
std::optional<uint64_t> parse_size(std::string_view text);

} // namespace lepus
