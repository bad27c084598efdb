// The reverse proxy's part of the serving set: which backends each site
// proxies to, and the per-reactor pools (one per distinct backend and
// settings, kept warm across a reload as the FastCGI pools are).
#include "proxy/backend_url.h"
#include "server/serving_set.h"

#include <algorithm>

namespace lepus {
namespace {

size_t proxy_pool_index(ServingSet& set, proxy::BackendOptions options) {
    for (size_t i = 0; i < set.proxy_pool_options.size(); ++i)
        if (set.proxy_pool_options[i] == options) return i;
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
    ServingSet::GroupSpec spec;
    std::vector<std::string> addresses{global.address};
    if (site) {
        addresses = site->addresses;
        spec.balancing = site->balancing;
        upstream::apply_health(spec.balancing, backend);
        route.paths = site->paths;
        route.host = site->host;
    }
    for (const std::string& address : addresses) {
        backend.address = *proxy::parse_backend_url(address); // checked with the options
        spec.members.push_back(proxy_pool_index(set, backend));
    }
    route.group = set.proxy_specs.size();
    set.proxy_specs.push_back(std::move(spec));
    return route;
}

void adopt_proxy_pools(ServingSet& next, const ServingSet* previous, Reactor& reactor,
                       upstream::UpstreamGauges* gauges) {
    next.proxy_pools.clear();
    for (const proxy::BackendOptions& options : next.proxy_pool_options) {
        std::shared_ptr<proxy::BackendPool> pool;
        for (size_t i = 0; previous && i < previous->proxy_pools.size() && !pool; ++i)
            if (previous->proxy_pools[i]->options() == options) pool = previous->proxy_pools[i];
        if (!pool) pool = std::make_shared<proxy::BackendPool>(reactor, options, gauges);
        next.proxy_pools.push_back(std::move(pool));
    }
    make_groups(next.proxy_specs, next.proxy_pools, next.proxy_groups);
}

void close_unshared_proxy_pools(ServingSet& set) {
    // The groups hold references too: let them go first.
    set.proxy_groups.clear();
    for (auto& pool : set.proxy_pools)
        if (pool.use_count() == 1) pool->close_all();
}

} // namespace lepus
