// Severity levels shared by the error log and its configuration.
#pragma once

#include <optional>
#include <string_view>

namespace lepus {

// Ordered from most to least severe: a configured level L lets through every level <= L.
enum class LogLevel { Error, Warn, Info, Debug };

// Parses "error", "warn", "info" or "debug" (ASCII case-insensitive); nullopt otherwise.
std::optional<LogLevel> parse_log_level(std::string_view name);

// The lower-case name nginx prints between brackets: "error", "warn", "info", "debug".
std::string_view log_level_name(LogLevel level);

} // namespace lepus
