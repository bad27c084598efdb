// PathPattern: a regular expression over a request's decoded path (PCRE2,
// JIT-compiled once when the config is read, shared read-only by every
// reactor), and the `$1`..`$9` substitution of a redirect's or rewrite's
// target, as nginx's `rewrite ^/blog/(\d+)/(.*)$ /posts/$1/$2`.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <memory>
#include <optional>
#include <pcre2.h>
#include <string>
#include <string_view>

namespace lepus {

// The match positions of one PathPattern::match, reused across requests (one
// per reactor: the router's scratch), so that matching allocates nothing.
class PatternMatch {
public:
    PatternMatch();
    // The text of capture `n` (0: the whole match) of the last successful match.
    std::string_view group(std::string_view subject, unsigned n) const;

private:
    friend class PathPattern;
    struct Free {
        void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
    };
    std::unique_ptr<pcre2_match_data, Free> data_;
};

class PathPattern {
public:
    // Compiles `expression` (bytes, no UTF: a path may hold any byte) and
    // JIT-compiles it where PCRE2 has a JIT; nullopt and one line in `error`
    // ("... at offset N") when it is not a valid expression.
    static std::optional<PathPattern> compile(const std::string& expression, std::string& error);

    // Whether `path` matches; the captures are then in `match`.
    bool match(std::string_view path, PatternMatch& match) const;
    unsigned capture_count() const { return captures_; }

private:
    struct Free {
        void operator()(pcre2_code* code) const { pcre2_code_free(code); }
    };
    std::shared_ptr<pcre2_code> code_; // shared by the config's copies
    unsigned captures_ = 0;
};

// Checks a target's `$N` references against `captures` groups: empty, or what is wrong.
std::string substitution_error(std::string_view target, unsigned captures);

// Appends `target` with each `$N` replaced by capture N of `match` over
// `subject`, percent-encoded (a capture of a decoded path may hold any byte,
// CR and LF included, and goes into a Location header or a new path).
void append_substituted(std::string_view target, std::string_view subject,
                        const PatternMatch& match, std::string& out);

} // namespace lepus
