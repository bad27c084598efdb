#include "server/site_table.h"

#include "base/ascii.h"
#include "http/path.h"

#include <algorithm>
#include <cctype>

namespace lepus {
namespace {

// "Example.COM:8080" -> "example.com"; "[::1]:80" -> "[::1]".
std::string normalize_host(std::string_view host) {
    if (!host.empty() && host.front() == '[') {
        host = host.substr(0, host.find(']') + 1);
    } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
        host = host.substr(0, colon);
    }
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    std::string out(host);
    for (char& c : out)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool ends_with_extension(std::string_view path, std::string_view extension) {
    return path.size() > extension.size() && path.ends_with(extension) &&
           path[path.size() - extension.size() - 1] != '/';
}

} // namespace

SiteTable::SiteTable(std::vector<SiteConfig> sites) : sites_(std::move(sites)) {
    for (auto& site : sites_)
        for (auto& name : site.server_names)
            name = normalize_host(name);
    for (size_t i = 0; i < sites_.size(); ++i)
        if (sites_[i].is_default) default_site_ = i;
}

size_t SiteTable::match(std::string_view host_header) const {
    std::string host = normalize_host(host_header);
    size_t best = default_site_;
    size_t best_length = 0;
    for (size_t i = 0; i < sites_.size(); ++i) {
        for (const std::string& name : sites_[i].server_names) {
            if (name == host) return i;
            // "*.example.com": the suffix ".example.com" after at least one label.
            if (name.size() > 2 && name.starts_with("*.")) {
                std::string_view suffix = std::string_view(name).substr(1);
                if (host.size() > suffix.size() && host.ends_with(suffix) &&
                    suffix.size() > best_length) {
                    best = i;
                    best_length = suffix.size();
                }
            }
        }
    }
    return best;
}

const Redirect* find_redirect(const SiteConfig& site, std::string_view path, PatternMatch& match) {
    for (const Redirect& redirect : site.redirects) {
        bool matches = redirect.compiled ? redirect.compiled->match(path, match)
                       : redirect.prefix ? path.starts_with(redirect.from)
                                         : redirect.from == path;
        if (matches) return &redirect;
    }
    return nullptr;
}

const Redirect* find_redirect(const SiteConfig& site, std::string_view path) {
    PatternMatch match;
    return find_redirect(site, path, match);
}

void append_redirect_target(const Redirect& redirect, std::string_view path, std::string_view query,
                            const PatternMatch& match, std::string& out) {
    if (!redirect.compiled && !redirect.prefix) {
        out.append(redirect.to);
        return;
    }
    if (redirect.compiled) {
        append_substituted(redirect.to, path, match, out);
    } else {
        out.append(redirect.to);
        append_percent_encoded(path.substr(redirect.from.size()), out);
    }
    if (query.empty()) return;
    out.push_back(redirect.to.find('?') == std::string::npos ? '?' : '&');
    out.append(query);
}

namespace {

bool rule_applies(const HeaderRule& rule, std::string_view path) {
    std::string_view match = rule.match;
    return match == "*" ||
           (match.starts_with("*.") && ends_with_extension(path, match.substr(1))) ||
           (match.starts_with("/") && path.starts_with(match));
}

bool names_header(const std::vector<HeaderRule>& rules, std::string_view name) {
    return std::any_of(rules.begin(), rules.end(),
                       [name](const HeaderRule& rule) { return ascii_iequals(rule.name, name); });
}

} // namespace

void add_rule_headers(const SiteConfig& site, std::string_view path, ResponseHead& out,
                      const SiteConfig* location) {
    for (const HeaderRule& rule : site.headers)
        if (rule_applies(rule, path) && (!location || !names_header(location->headers, rule.name)))
            out.add(rule.name, rule.value);
    if (!location) return;
    for (const HeaderRule& rule : location->headers)
        if (rule_applies(rule, path)) out.add(rule.name, rule.value);
}

} // namespace lepus
