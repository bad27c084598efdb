// SiteTable: picks the [[site]] that serves a request by its Host, and the
// per-site rules applied around the static handler (redirects, extra headers).
#pragma once

#include "http/response_head.h"
#include "server/config_file.h"
#include "server/path_pattern.h"

#include <string>
#include <string_view>
#include <vector>

namespace lepus {

class SiteTable {
public:
    explicit SiteTable(std::vector<SiteConfig> sites);

    // The site for `host` (a Host header value; the port and a trailing dot are
    // ignored, names compare case-insensitively): an exact name first, then the
    // longest matching wildcard ("*.example.com" matches "a.example.com" and
    // "a.b.example.com", not "example.com"), else the default site.
    size_t match(std::string_view host) const;

    const SiteConfig& site(size_t index) const { return sites_[index]; }
    size_t size() const { return sites_.size(); }
    bool empty() const { return sites_.empty(); }

private:
    std::vector<SiteConfig> sites_;
    size_t default_site_ = 0;
};

// The first of the site's redirects that matches `path` (decoded, without the
// query), with a pattern's captures in `match`; nullptr when none does.
const Redirect* find_redirect(const SiteConfig& site, std::string_view path, PatternMatch& match);
const Redirect* find_redirect(const SiteConfig& site, std::string_view path); // tests

// Appends where `redirect` sends `path`?`query` (`query` without its '?'):
// exact, `to` as written; prefix, `to` + the rest of the path + the query;
// pattern, `to` with $N replaced + the query (after `to`'s own with '&', as
// nginx). What comes from the path is percent-encoded.
void append_redirect_target(const Redirect& redirect, std::string_view path, std::string_view query,
                            const PatternMatch& match, std::string& out);

// Adds a field for every header rule of `site` that matches `path`, then of
// `location` (a location's own SiteConfig, may be null): a name the
// location's rules set is not taken from the site's.
void add_rule_headers(const SiteConfig& site, std::string_view path, ResponseHead& out,
                      const SiteConfig* location = nullptr);

} // namespace lepus
