#include "server/path_pattern.h"

#include "http/path.h"

namespace lepus {
namespace {

// Enough pairs for $0..$9; a pattern with more groups still matches (PCRE2
// then fills what fits, and the target may only name $1..$9).
constexpr uint32_t kPairs = 10;

} // namespace

PatternMatch::PatternMatch() : data_(pcre2_match_data_create(kPairs, nullptr)) {}

std::string_view PatternMatch::group(std::string_view subject, unsigned n) const {
    if (!data_ || n >= pcre2_get_ovector_count(data_.get())) return {};
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_.get());
    PCRE2_SIZE begin = ovector[2 * size_t(n)], end = ovector[2 * size_t(n) + 1];
    if (begin == PCRE2_UNSET || end < begin || end > subject.size()) return {}; // unset group
    return subject.substr(begin, end - begin);
}

std::optional<PathPattern> PathPattern::compile(const std::string& expression, std::string& error) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expression.data()),
                                         expression.size(), 0, &code, &offset, nullptr);
    if (!compiled) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        error = "pattern '" + expression + "': " + reinterpret_cast<const char*>(message) +
                " at offset " + std::to_string(offset);
        return std::nullopt;
    }
    // Without a JIT (PCRE2 built without it, or W^X memory refused) the
    // interpreter matches: slower, the same answers.
    pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
    PathPattern pattern;
    pattern.code_ = std::shared_ptr<pcre2_code>(compiled, Free{});
    uint32_t captures = 0;
    pcre2_pattern_info(compiled, PCRE2_INFO_CAPTURECOUNT, &captures);
    pattern.captures_ = captures;
    return pattern;
}

bool PathPattern::match(std::string_view path, PatternMatch& match) const {
    if (!code_ || !match.data_) return false;
    // pcre2_match takes the JIT path itself when the pattern has one.
    int result = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(path.data()), path.size(), 0,
                             0, match.data_.get(), nullptr);
    return result >= 0; // 0: more groups than kPairs, the first ones are set
}

std::string substitution_error(std::string_view target, unsigned captures) {
    for (size_t i = 0; i + 1 < target.size(); ++i) {
        if (target[i] != '$' || target[i + 1] < '0' || target[i + 1] > '9') continue;
        auto n = unsigned(target[i + 1] - '0');
        if (n > captures)
            return "'" + std::string(target) + "' names $" + std::to_string(n) +
                   " but the pattern has " + std::to_string(captures) + " group(s)";
    }
    return {};
}

void append_substituted(std::string_view target, std::string_view subject,
                        const PatternMatch& match, std::string& out) {
    for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == '$' && i + 1 < target.size() && target[i + 1] >= '0' &&
            target[i + 1] <= '9') {
            append_percent_encoded(match.group(subject, unsigned(target[i + 1] - '0')), out);
            ++i;
        } else {
            out.push_back(target[i]);
        }
    }
}

} // namespace lepus
