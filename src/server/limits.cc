// Rule lookup and allow/deny for the limits. See limits.h.
#include "server/limits.h"

#include <algorithm>

namespace lepus {
namespace {

template <typename Rule>
const Rule* longest_prefix(const std::vector<Rule>& rules, std::string_view decoded_path) {
    const Rule* best = nullptr;
    size_t best_length = 0;
    for (const Rule& rule : rules)
        for (const std::string& prefix : rule.paths)
            if (decoded_path.starts_with(prefix) && (!best || prefix.size() > best_length)) {
                best = &rule;
                best_length = prefix.size();
            }
    return best;
}

} // namespace

const AccessRule* find_access_rule(const SiteConfig& site, std::string_view decoded_path) {
    return longest_prefix(site.access, decoded_path);
}

const LimitRule* find_limit_rule(const SiteConfig& site, std::string_view decoded_path) {
    return longest_prefix(site.limits, decoded_path);
}

bool access_allows(const AccessRule& rule, const SocketAddress& client) {
    auto in = [&client](const Cidr& network) { return network.contains(client); };
    if (std::any_of(rule.allow.begin(), rule.allow.end(), in)) return true;
    return std::none_of(rule.deny.begin(), rule.deny.end(), in);
}

} // namespace lepus
