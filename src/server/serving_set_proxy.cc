// The reverse proxy's part of the serving set: which backends each site
// proxies to, and the per-reactor pools (one per distinct backend and
// settings, kept warm across a reload as the FastCGI pools are).
#include "proxy/backend_url.h"
#include "server/serving_set.h"

#include <algorithm>

namespace lepus {
namespace {

bool same_backend(const proxy::BackendOptions& a, const proxy::BackendOptions& b) {
    return a.address.text == b.address.text && a.connections == b.connections &&
           a.tunnels == b.tunnels && a.queue_limit == b.queue_limit &&
           a.queue_timeout_ms == b.queue_timeout_ms &&
           a.connect_timeout_ms == b.connect_timeout_ms &&
           a.response_timeout_ms == b.response_timeout_ms &&
           a.idle_timeout_ms == b.idle_timeout_ms && a.head_max == b.head_max;
}

size_t proxy_pool_index(ServingSet& set, proxy::BackendOptions options) {
    for (size_t i = 0; i < set.proxy_pool_options.size(); ++i)
        if (same_backend(set.proxy_pool_options[i], options)) return i;
    set.proxy_pool_options.push_back(std::move(options));
    return set.proxy_pool_options.size() - 1;
}

} // namespace

SiteHandlers::ProxyRoute make_proxy_route(ServingSet& set, const ServerOptions& options,
                                          const SiteProxy* site, unsigned index, unsigned threads) {
    const ProxyOptions& global = options.proxy;
    unsigned total = site && site->pool ? *site->pool : global.pool;
    proxy::BackendOptions backend;
    // This reactor's share: the backend sees `total` connections in all.
    backend.connections = std::max(1u, total / threads + (index < total % threads ? 1u : 0u));
    unsigned tunnels = global.tunnels;
    backend.tunnels = std::max(1u, tunnels / threads + (index < tunnels % threads ? 1u : 0u));
    backend.queue_limit = site && site->queue ? *site->queue : global.queue;
    backend.queue_timeout_ms = global.queue_timeout_ms;
    backend.connect_timeout_ms = global.connect_timeout_ms;
    backend.response_timeout_ms = site && site->timeout_ms ? *site->timeout_ms : global.timeout_ms;
    backend.idle_timeout_ms = global.idle_timeout_ms;
    backend.head_max = global.head_max;
    SiteHandlers::ProxyRoute route;
    std::vector<size_t> members;
    std::vector<std::string> addresses{global.address};
    if (site) {
        addresses = site->addresses;
        route.paths = site->paths;
        route.host = site->host;
    }
    for (const std::string& address : addresses) {
        backend.address = *proxy::parse_backend_url(address); // checked with the options
        members.push_back(proxy_pool_index(set, backend));
    }
    route.group = set.proxy_group_members.size();
    set.proxy_group_members.push_back(std::move(members));
    return route;
}

void adopt_proxy_pools(ServingSet& next, const ServingSet* previous, Reactor& reactor,
                       fastcgi::UpstreamGauges* gauges) {
    next.proxy_pools.clear();
    for (const proxy::BackendOptions& options : next.proxy_pool_options) {
        std::shared_ptr<proxy::BackendPool> pool;
        for (size_t i = 0; previous && i < previous->proxy_pools.size() && !pool; ++i)
            if (same_backend(previous->proxy_pools[i]->options(), options))
                pool = previous->proxy_pools[i];
        if (!pool) pool = std::make_shared<proxy::BackendPool>(reactor, options, gauges);
        next.proxy_pools.push_back(std::move(pool));
    }
    next.proxy_groups.clear();
    for (const std::vector<size_t>& members : next.proxy_group_members) {
        proxy::BackendGroup& group = next.proxy_groups.emplace_back();
        for (size_t member : members)
            group.pools.push_back(next.proxy_pools[member]);
    }
}

void close_unshared_proxy_pools(ServingSet& set) {
    // The groups hold references too: let them go first.
    set.proxy_groups.clear();
    for (auto& pool : set.proxy_pools)
        if (pool.use_count() == 1) pool->close_all();
}

} // namespace lepus
