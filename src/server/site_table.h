// SiteTable: picks the [[site]] that serves a request by its Host, and the
// per-site rules applied around the static handler (redirects, extra headers).
#pragma once

#include "http/response_head.h"
#include "server/config_file.h"

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

// The redirect configured for exactly `path` (decoded, without the query), or nullptr.
const Redirect* find_redirect(const SiteConfig& site, std::string_view path);

// Adds a field for every header rule of `site` that matches `path`.
void add_rule_headers(const SiteConfig& site, std::string_view path, ResponseHead& out);

} // namespace lepus
