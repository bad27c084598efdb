#include "server/try_files.h"

#include <charconv>

namespace lepus {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

std::optional<TryFiles::Candidate> parse_candidate(std::string_view word, bool last,
                                                   std::string& error) {
    TryFiles::Candidate candidate;
    if (word.starts_with('=')) {
        std::string_view digits = word.substr(1);
        auto [end, ec] =
            std::from_chars(digits.data(), digits.data() + digits.size(), candidate.status);
        if (ec != std::errc() || end != digits.data() + digits.size() || candidate.status < 200 ||
            candidate.status > 599) {
            error = "try_files: '" + std::string(word) + "' is not =CODE (200-599)";
            return std::nullopt;
        }
        if (!last) {
            error = "try_files: a status ('" + std::string(word) + "') can only come last";
            return std::nullopt;
        }
        return candidate;
    }
    if (!word.starts_with('/') && !word.starts_with("$uri")) {
        error = "try_files: '" + std::string(word) + "' must start with / or $uri";
        return std::nullopt;
    }
    size_t question = word.find('?');
    candidate.path = word.substr(0, question);
    if (question != std::string_view::npos) {
        if (!last) {
            error = "try_files: only the last candidate may carry a query ('" + std::string(word) +
                    "')";
            return std::nullopt;
        }
        candidate.has_query = true;
        candidate.query = word.substr(question + 1);
    }
    if (candidate.path.find("..") != std::string::npos) {
        error = "try_files: '" + std::string(word) + "' must not contain ..";
        return std::nullopt;
    }
    return candidate;
}

} // namespace

void TryFiles::expand_path(const Candidate& candidate, std::string_view uri, std::string& out) {
    out = candidate.path;
    replace_all(out, "$uri", uri);
}

void TryFiles::expand_query(const Candidate& candidate, std::string_view uri,
                            std::string_view query, std::string& out) {
    out = candidate.query;
    replace_all(out, "$query_string", query);
    replace_all(out, "$args", query);
    if (out.find("$uri") == std::string::npos) return;
    // nginx puts the path in as it is; escaping what would end the value
    // (&, =, #, +, %, spaces) keeps a path such as "/a&b" one parameter.
    std::string escaped;
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char c : uri) {
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alnum || std::string_view("-._~/:@!$'()*,;").find(char(c)) != std::string_view::npos) {
            escaped.push_back(char(c));
        } else {
            escaped.push_back('%');
            escaped.push_back(kHex[c >> 4]);
            escaped.push_back(kHex[c & 15]);
        }
    }
    replace_all(out, "$uri", escaped);
}

std::optional<TryFiles> parse_try_files(const std::vector<std::string>& words, std::string& error) {
    std::vector<std::string_view> split;
    for (const std::string& word : words) {
        std::string_view rest = word;
        while (!rest.empty()) {
            size_t start = rest.find_first_not_of(" \t");
            if (start == std::string_view::npos) break;
            rest.remove_prefix(start);
            size_t end = rest.find_first_of(" \t");
            split.push_back(rest.substr(0, end));
            rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
        }
    }
    if (split.size() < 2) {
        error = "try_files needs at least two candidates (files to try, then a fallback), as in "
                "nginx";
        return std::nullopt;
    }
    TryFiles result;
    for (size_t i = 0; i < split.size(); ++i) {
        auto candidate = parse_candidate(split[i], i + 1 == split.size(), error);
        if (!candidate) return std::nullopt;
        result.candidates.push_back(std::move(*candidate));
    }
    return result;
}

} // namespace lepus
