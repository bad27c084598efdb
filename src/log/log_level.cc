#include "log/log_level.h"

namespace lepus {

namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        if (c != b[i]) return false;
    }
    return true;
}

constexpr LogLevel kAllLevels[] = {LogLevel::Error, LogLevel::Warn, LogLevel::Info,
                                   LogLevel::Debug};

} // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
    for (LogLevel level : kAllLevels) {
        if (equals_ignoring_case(name, log_level_name(level))) return level;
    }
    return std::nullopt;
}

std::string_view log_level_name(LogLevel level) {
    switch (level) {
    case LogLevel::Error:
        return "error";
    case LogLevel::Warn:
        return "warn";
    case LogLevel::Info:
        return "info";
    case LogLevel::Debug:
        return "debug";
    }
    return "unknown";
}

} // namespace lepus
