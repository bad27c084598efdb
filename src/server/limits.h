// Per-client limits and access rules of a site (config_file.h AccessRule,
// LimitRule, conn_limit), as the router's steps use them: which rule covers
// a path, and whether an address passes an allow/deny rule. The per-client
// state (buckets, counters) is server/client_table.h's; the wait of a request
// delayed within its burst is server/delay_stream.h's.
#pragma once

#include "server/config_file.h"

#include <string_view>

namespace lepus {

// The rule whose path prefix is the longest to match `decoded_path`, or nullptr.
const AccessRule* find_access_rule(const SiteConfig& site, std::string_view decoded_path);
const LimitRule* find_limit_rule(const SiteConfig& site, std::string_view decoded_path);

// nginx's allow/deny within one rule: an allowed network passes, then a denied
// one is refused, and an address in neither passes.
bool access_allows(const AccessRule& rule, const SocketAddress& client);

// Retry-After's delay-seconds (RFC 9110 §10.2.3) for a wait in milliseconds: at least 1.
inline uint64_t retry_after_seconds(uint64_t ms) {
    return ms < 1000 ? 1 : (ms + 999) / 1000;
}

} // namespace lepus
