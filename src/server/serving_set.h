// ServingSet: what one worker serves with — the default root's handlers and one
// SiteHandlers per [[site]] (files, FastCGI scripts and backend pool, access
// log, error pages) — and SiteLogs, the per-site access logs they write to.
//
// SIGHUP builds a new set for every worker on the main thread; the worker takes
// it at its next request (Worker::serving) and a request in flight keeps the
// set it started with. Backend pools belong to one reactor, so a set only names
// its backends (pool_options) and the worker makes the pools when it takes the
// set, on its own thread, keeping the warm pools of the previous set whose
// settings did not change (adopt_pools).
#pragma once

#include "fastcgi/cgi_params.h"
#include "fastcgi/script_resolver.h"
#include "fastcgi/upstream.h"
#include "http/buffered_body_stream.h"
#include "http/static_handler.h"
#include "log/async_logger.h"
#include "proxy/proxy_exchange.h"
#include "server/options.h"
#include "server/site_table.h"
#include "server/x_accel.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

// An HTTP backend (server/router_proxy.cc): the ServingSet::proxy_groups
// index, the path prefixes it serves (none: what the files lack) and the Host to send.
struct ProxyRoute {
    size_t group = 0;
    std::vector<std::string> paths;
    std::string host;
};

// How one of a site's `locations` is served (server/router_locations.cc).
struct LocationHandlers {
    const SiteLocation* config = nullptr;
    // The keys the location sets itself (SiteLocation::own): never null.
    const SiteConfig* own = nullptr;
    std::unique_ptr<StaticHandler> files;             // null: no root of its own
    std::unique_ptr<fastcgi::ScriptResolver> scripts; // handler = "fastcgi"
    std::optional<ProxyRoute> proxy;                  // handler = "proxy"
    // The site's script extensions: a static location refuses them (403).
    std::shared_ptr<const std::vector<std::string>> script_extensions;
    std::vector<std::string_view> extension_views;
};

// How one site (or the default root, when there are no [[site]] blocks) is served.
struct SiteHandlers {
    std::unique_ptr<StaticHandler> files;
    std::unique_ptr<fastcgi::ScriptResolver> scripts; // null: everything is static here
    size_t pool = 0; // ServingSet::fastcgi_groups index, with scripts
    // --fastcgi-param with the site's `fastcgi_params` on top, sent with every script.
    std::vector<fastcgi::CgiParam> fastcgi_params;
    AsyncLogger* access_log = nullptr; // null: the global access log
    // The default root's redirect to HTTPS (a site's is its config's): plain
    // requests for --domain's names get 301 to this TLS port (0: none).
    uint16_t https_redirect = 0;
    std::vector<std::string> https_redirect_names;
    // The site's access_log_format, else the global one; null or Combined:
    // append_combined_line, the fast path.
    const AccessLogFormat* log_format = nullptr;
    const SiteConfig* config = nullptr; // null for the default root
    std::optional<TryFiles> try_files;  // the site's, else --try-files / --spa
    bool compress = true;               // scripts' output too (--compress)
    // Request bodies for scripts and backends are taken whole first (memory,
    // then a temporary file); nullopt: streamed (`request_buffering = false`).
    std::optional<BodyBufferOptions> body_buffer;
    // The internal folder for X-Accel-Redirect / X-Sendfile and its files; null: none.
    std::optional<XAccel> x_accel;
    std::unique_ptr<StaticHandler> x_accel_files;
    using ProxyRoute = lepus::ProxyRoute;
    std::optional<ProxyRoute> proxy;
    // The router's rule steps this site needs, for its own rules or a
    // location's (set with the handlers): a site without such rules pays one
    // test per step, whether it has locations or not.
    struct Uses {
        bool conn_limit = false, limits = false, access = false, auth = false;
        bool headers = false, try_files = false, locations = false;
    } uses;

    // The site's first name, for the error log ("server: ..."); empty for the default root.
    std::string_view name() const {
        return config && !config->server_names.empty() ? std::string_view(config->server_names[0])
                                                       : std::string_view();
    }
    // The site's `locations` (server/router_locations.cc), exact ones first,
    // then prefixes longest first: the first that matches is the request's.
    using Location = LocationHandlers;
    std::vector<Location> locations;
};

struct ServingSet {
    SiteHandlers root;
    std::shared_ptr<const SiteTable> sites;  // null without [[site]] blocks
    std::vector<SiteHandlers> site_handlers; // in the order of sites
    // A site's backends (indexes into pool_options or proxy_pool_options) and
    // how a request picks one.
    struct GroupSpec {
        std::vector<size_t> members;
        upstream::Balancing balancing;
    };
    // One entry per distinct backend (address and settings), shared by the
    // sites that name it, and per site with scripts its group of them.
    // `pools` and `fastcgi_groups` are filled by adopt_pools on the worker's thread.
    std::vector<fastcgi::UpstreamOptions> pool_options;
    std::vector<GroupSpec> fastcgi_specs;
    std::vector<std::shared_ptr<fastcgi::UpstreamPool>> pools;
    std::vector<upstream::Group> fastcgi_groups;
    // HTTP backends alike.
    std::vector<proxy::BackendOptions> proxy_pool_options;
    std::vector<GroupSpec> proxy_specs;
    std::vector<std::shared_ptr<proxy::BackendPool>> proxy_pools;
    std::vector<upstream::Group> proxy_groups;
    // --access-log-format, for the lines of no site (a request the parser refused).
    std::shared_ptr<const AccessLogFormat> access_log_format;
    // Keeps the per-site access logs this set writes to open.
    std::vector<std::shared_ptr<AsyncLogger>> access_logs;

    // The site serving `host` (the default root without [[site]] blocks).
    SiteHandlers& for_host(std::string_view host) {
        return sites ? site_handlers[sites->match(host)] : root;
    }
    upstream::Group& fastcgi_of(const SiteHandlers& site) { return fastcgi_groups[site.pool]; }
    proxy::BackendGroup& proxy_of(const SiteHandlers& site) {
        return proxy_groups[site.proxy->group];
    }
};

// The groups of `specs` (FastCGI's or the proxy's), from the pools made for them.
template <class PoolPointer>
void make_groups(const std::vector<ServingSet::GroupSpec>& specs,
                 const std::vector<PoolPointer>& pools, std::vector<upstream::Group>& groups) {
    groups.clear();
    for (const ServingSet::GroupSpec& spec : specs) {
        std::vector<std::shared_ptr<upstream::Pool>> members;
        for (size_t member : spec.members)
            members.push_back(pools[member]);
        groups.emplace_back(std::move(members), spec.balancing);
    }
}

// The per-site access logs: one AsyncLogger per distinct path, shared by every
// reactor and every serving set that names it. Main thread only.
class SiteLogs {
public:
    // The started logger for `path`, made on first use; nullptr and one line in
    // `error` when the file cannot be opened.
    std::shared_ptr<AsyncLogger> get(const std::string& path, std::string& error);
    // SIGUSR1: every logger reopens its file.
    void reopen();
    // Stops (flushing every line) and forgets the loggers no serving set holds any more.
    void prune();
    // At exit, once no reactor runs: flushes and stops them all.
    void stop();

private:
    std::map<std::string, std::shared_ptr<AsyncLogger>> loggers_;
};

// The set worker `index` of `threads` serves with. nullptr and one line in
// `error` when a root cannot be opened or a per-site log cannot be written.
// Takes this worker's share of every backend's pool (pool / threads, at least one).
std::unique_ptr<ServingSet> make_serving_set(const ServerOptions& options,
                                             const std::shared_ptr<const SiteTable>& sites,
                                             SiteLogs& logs, unsigned index, unsigned threads,
                                             std::string& error);

// The proxy route of a site (`site`: its own `proxy`, else the global --proxy),
// its backends added to `set` (server/serving_set_proxy.cc).
SiteHandlers::ProxyRoute make_proxy_route(ServingSet& set, const ServerOptions& options,
                                          const SiteProxy* site, unsigned index, unsigned threads);
// adopt_pools and close_unshared_pools for the proxy's pools.
void adopt_proxy_pools(ServingSet& next, const ServingSet* previous, Reactor& reactor,
                       upstream::UpstreamGauges* gauges);
void close_unshared_proxy_pools(ServingSet& set);

// On the worker's thread: makes the pools of `next`, taking over those of
// `previous` (may be null) whose backend and settings are the same.
void adopt_pools(ServingSet& next, const ServingSet* previous, Reactor& reactor,
                 upstream::UpstreamGauges& gauges,
                 upstream::UpstreamGauges* proxy_gauges = nullptr);

// On the worker's thread, before a set that no request holds any more is
// destroyed: closes the backend connections of the pools no other set shares.
void close_unshared_pools(ServingSet& set);

} // namespace lepus
