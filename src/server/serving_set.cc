#include "server/serving_set.h"

#include "log/error_log.h"
#include "server/acme_options.h"

#include <algorithm>

namespace lepus {
namespace {

// This worker's share of a pool of `total` connections: php-fpm sees `total`
// in all, at least one per reactor.
size_t share(unsigned total, unsigned index, unsigned threads) {
    return std::max(1u, total / threads + (index < total % threads ? 1u : 0u));
}

// The index in set.pool_options of `options`, added when new.
size_t pool_index(ServingSet& set, fastcgi::UpstreamOptions options) {
    for (size_t i = 0; i < set.pool_options.size(); ++i)
        if (set.pool_options[i] == options) return i;
    set.pool_options.push_back(std::move(options));
    return set.pool_options.size() - 1;
}

// The global --fastcgi* backend, or one address of a [[site]]'s own `fastcgi`
// on top of it.
fastcgi::UpstreamOptions backend_options(const ServerOptions& options, const SiteFastCgi* site,
                                         std::string_view address, unsigned index,
                                         unsigned threads) {
    fastcgi::UpstreamOptions upstream;
    upstream.address = *upstream::parse_backend_address(address); // validated by the options
    upstream.connections =
        share(site && site->pool ? *site->pool : options.fastcgi_pool, index, threads);
    upstream.queue_limit = site && site->queue ? *site->queue : options.fastcgi_queue;
    upstream.queue_timeout_ms = options.fastcgi_queue_timeout_ms;
    upstream.response_timeout_ms =
        site && site->timeout_ms ? *site->timeout_ms : options.fastcgi_timeout_ms;
    upstream.idle_timeout_ms = options.fastcgi_idle_timeout_ms;
    upstream.connect_timeout_ms = options.fastcgi_connect_timeout_ms;
    upstream.keep_alive = site && site->keepalive ? *site->keepalive : options.fastcgi_keepalive;
    return upstream;
}

// The FastCGI group of a site (`site`: its own `fastcgi`, else the global
// --fastcgi), its backends added to `set`: the index in set.fastcgi_specs.
size_t fastcgi_group(ServingSet& set, const ServerOptions& options, const SiteFastCgi* site,
                     const std::string& root, unsigned index, unsigned threads) {
    ServingSet::GroupSpec spec;
    std::vector<std::string> addresses{options.fastcgi};
    if (site) {
        addresses = site->addresses;
        spec.balancing = site->balancing;
    }
    for (const std::string& address : addresses) {
        fastcgi::UpstreamOptions backend = backend_options(options, site, address, index, threads);
        upstream::apply_health(spec.balancing, backend);
        backend.health_root = root;
        spec.members.push_back(pool_index(set, std::move(backend)));
    }
    set.fastcgi_specs.push_back(std::move(spec));
    return set.fastcgi_specs.size() - 1;
}

BodyBufferOptions body_buffer_options(const ServerOptions& options) {
    return {size_t(options.client_body_buffer), options.temp_dir};
}

} // namespace

std::shared_ptr<AsyncLogger> SiteLogs::get(const std::string& path, std::string& error) {
    auto it = loggers_.find(path);
    if (it != loggers_.end()) return it->second;
    auto logger = std::make_shared<AsyncLogger>(AsyncLoggerOptions{.path = path});
    if (!logger->start(error)) return nullptr;
    loggers_.emplace(path, logger);
    return logger;
}

void SiteLogs::reopen() {
    for (auto& [path, logger] : loggers_)
        logger->reopen();
}

void SiteLogs::prune() {
    // use_count() 1: only this map holds it, and only this (main) thread hands
    // out new references, so nobody can start writing to it again.
    for (auto it = loggers_.begin(); it != loggers_.end();) {
        if (it->second.use_count() == 1) {
            it->second->stop();
            it = loggers_.erase(it);
        } else {
            ++it;
        }
    }
}

void SiteLogs::stop() {
    for (auto& [path, logger] : loggers_)
        logger->stop();
}

// The internal folder of X-Accel-Redirect / X-Sendfile, served with the
// site's file options, but without index or listing: a script names a file.
bool make_x_accel_files(const std::optional<XAccel>& x_accel, const StaticOptions& site_options,
                        SiteHandlers& handlers, std::string& error) {
    handlers.x_accel = x_accel; // a copy: the options it came from may be a reload's
    if (!x_accel) return true;
    StaticOptions options = site_options;
    options.root = x_accel->root;
    options.index.clear();
    options.autoindex = false;
    handlers.x_accel_files = StaticHandler::create(options, error);
    if (!handlers.x_accel_files) error.insert(0, "x-accel: ");
    return bool(handlers.x_accel_files);
}

// The site's locations, each with its own files (and scripts) under its
// root, with the site's file options otherwise, or its own HTTP backend;
// sorted for the router.
bool make_locations(const SiteConfig& site, const StaticOptions& site_options,
                    const fastcgi::ScriptResolverOptions* scripts, SiteHandlers& handlers,
                    ServingSet& set, const ServerOptions& server, unsigned index, unsigned threads,
                    std::string& error) {
    auto extensions = std::make_shared<const std::vector<std::string>>(
        scripts ? scripts->extensions : std::vector<std::string>{});
    for (const SiteLocation& config : site.locations) {
        SiteHandlers::Location location;
        location.config = &config;
        static const SiteConfig no_keys; // a location made by hand, not read: none of its own
        location.own = config.own ? config.own.get() : &no_keys;
        if (config.handler == "proxy" && location.own->proxy)
            location.proxy = make_proxy_route(set, server, &*location.own->proxy, index, threads);
        if (!config.root.empty()) {
            StaticOptions options = site_options;
            options.root = config.root;
            location.files = StaticHandler::create(options, error);
            if (location.files && config.handler == "fastcgi" && scripts) {
                fastcgi::ScriptResolverOptions own = *scripts;
                own.root = config.root;
                location.scripts = fastcgi::ScriptResolver::create(own, error);
            }
            if (!location.files || (config.handler == "fastcgi" && !location.scripts)) {
                if (config.handler == "fastcgi" && !scripts) error = "the site has no fastcgi";
                error.insert(0, config.origin + ": location " + config.path + ": ");
                return false;
            }
        }
        location.script_extensions = extensions;
        location.extension_views.assign(extensions->begin(), extensions->end());
        handlers.locations.push_back(std::move(location));
    }
    std::stable_sort(handlers.locations.begin(), handlers.locations.end(),
                     [](const SiteHandlers::Location& a, const SiteHandlers::Location& b) {
                         if (a.config->exact != b.config->exact) return a.config->exact;
                         return a.config->path.size() > b.config->path.size();
                     });
    return true;
}

// Which rule steps a site's requests go through (SiteHandlers::uses).
SiteHandlers::Uses site_uses(const SiteConfig& site, bool try_files) {
    SiteHandlers::Uses uses;
    auto add = [&uses](const SiteConfig& config) {
        uses.conn_limit |= config.conn_limit != 0;
        uses.limits |= !config.limits.empty();
        uses.access |= !config.access.empty();
        uses.auth |= !config.auth.empty();
        uses.headers |= !config.headers.empty();
        uses.try_files |= config.try_files.has_value();
    };
    add(site);
    for (const SiteLocation& location : site.locations)
        if (location.own) add(*location.own);
    uses.try_files |= try_files; // the site's own, or --try-files / --spa
    uses.locations = !site.locations.empty();
    return uses;
}

std::unique_ptr<ServingSet> make_serving_set(const ServerOptions& options,
                                             const std::shared_ptr<const SiteTable>& sites,
                                             SiteLogs& logs, unsigned index, unsigned threads,
                                             std::string& error) {
    StaticOptions base;
    base.root = options.root;
    base.index = options.index;
    base.autoindex = options.autoindex;
    base.dotfiles_allow = options.dotfiles_allow;
    base.compress = options.compress;
    base.symlinks = options.symlinks;
    base.backend_methods = !options.fastcgi.empty() || !options.proxy.address.empty();
    auto set = std::make_unique<ServingSet>();
    set->root.files = StaticHandler::create(base, error);
    if (!set->root.files) return nullptr;
    set->access_log_format = options.access_log_format;
    set->root.log_format = options.access_log_format.get();
    set->root.try_files = options.try_files;
    set->root.uses.try_files = options.try_files.has_value();
    set->root.compress = options.compress;
    if (!options.domains.empty()) { // an ACME root is an HTTPS site, as an ACME [[site]]
        set->root.https_redirect = acme_redirect_port(options);
        set->root.https_redirect_names = options.domains;
    }
    if (options.request_buffering) set->root.body_buffer = body_buffer_options(options);
    if (!make_x_accel_files(options.x_accel, base, set->root, error)) return nullptr;
    set->sites = sites;
    bool global_fastcgi = !options.fastcgi.empty();
    if (global_fastcgi && !sites) {
        fastcgi::ScriptResolverOptions scripts{options.root, options.fastcgi_ext, options.index,
                                               options.dotfiles_allow, options.symlinks};
        set->root.scripts = fastcgi::ScriptResolver::create(scripts, error);
        if (!set->root.scripts) return nullptr;
        set->root.pool = fastcgi_group(*set, options, nullptr, options.root, index, threads);
        set->root.fastcgi_params = options.fastcgi_params;
    }
    if (!options.proxy.address.empty() && !sites)
        set->root.proxy = make_proxy_route(*set, options, nullptr, index, threads);
    for (size_t i = 0; sites && i < sites->size(); ++i) {
        const SiteConfig& site = sites->site(i);
        SiteHandlers handlers;
        handlers.config = &site;
        handlers.log_format =
            site.access_log_format ? site.access_log_format.get() : options.access_log_format.get();
        handlers.try_files = site.try_files ? site.try_files : options.try_files;
        handlers.uses = site_uses(site, handlers.try_files.has_value());
        handlers.compress = site.compress.value_or(options.compress);
        if (site.request_buffering.value_or(options.request_buffering))
            handlers.body_buffer = body_buffer_options(options);
        StaticOptions site_options = base;
        site_options.root = site.root;
        if (site.index)
            site_options.index = *site.index;
        else if (site.fastcgi && !global_fastcgi && options.index == ServerOptions{}.index)
            // A PHP site answers directories with index.php first, as the global
            // --fastcgi does (nginx's usual "index index.php index.html").
            site_options.index = {"index.php", "index.html"};
        if (site.autoindex) site_options.autoindex = *site.autoindex;
        if (site.dotfiles_allow) site_options.dotfiles_allow = *site.dotfiles_allow;
        if (site.compress) site_options.compress = *site.compress;
        if (site.symlinks) site_options.symlinks = *parse_symlink_policy(*site.symlinks);
        site_options.backend_methods |=
            site.fastcgi || site.proxy ||
            std::any_of(site.locations.begin(), site.locations.end(),
                        [](const SiteLocation& location) { return location.handler == "proxy"; });
        handlers.files = StaticHandler::create(site_options, error);
        const std::optional<XAccel>& x_accel = site.x_accel ? site.x_accel : options.x_accel;
        if (!handlers.files || !make_x_accel_files(x_accel, site_options, handlers, error)) {
            error.insert(0, site.origin + ": ");
            return nullptr;
        }
        // A site without its own `fastcgi` sends its scripts, resolved under its
        // own root, to the global backend (nginx inherits fastcgi_pass alike).
        std::optional<fastcgi::ScriptResolverOptions> scripts;
        if (site.fastcgi || global_fastcgi) {
            const SiteFastCgi* own = site.fastcgi ? &*site.fastcgi : nullptr;
            scripts = fastcgi::ScriptResolverOptions{
                site.root, own && !own->ext.empty() ? own->ext : options.fastcgi_ext,
                site_options.index, site_options.dotfiles_allow, site_options.symlinks};
            handlers.scripts = fastcgi::ScriptResolver::create(*scripts, error);
            if (!handlers.scripts) {
                error.insert(0, site.origin + ": ");
                return nullptr;
            }
            handlers.pool = fastcgi_group(*set, options, own, site.root, index, threads);
            handlers.fastcgi_params = options.fastcgi_params;
            fastcgi::merge_cgi_params(handlers.fastcgi_params, site.fastcgi_params);
        }
        if (!make_locations(site, site_options, scripts ? &*scripts : nullptr, handlers, *set,
                            options, index, threads, error))
            return nullptr;
        if (site.proxy || !options.proxy.address.empty())
            handlers.proxy = make_proxy_route(*set, options, site.proxy ? &*site.proxy : nullptr,
                                              index, threads);
        if (site.access_log && *site.access_log != options.access_log) {
            auto log = logs.get(*site.access_log, error);
            if (!log) {
                error.insert(0, site.origin + ": access log: ");
                return nullptr;
            }
            handlers.access_log = log.get();
            if (std::find(set->access_logs.begin(), set->access_logs.end(), log) ==
                set->access_logs.end())
                set->access_logs.push_back(std::move(log));
        }
        set->site_handlers.push_back(std::move(handlers));
    }
    return set;
}

void adopt_pools(ServingSet& next, const ServingSet* previous, Reactor& reactor,
                 upstream::UpstreamGauges& gauges, upstream::UpstreamGauges* proxy_gauges) {
    next.pools.clear();
    for (const fastcgi::UpstreamOptions& options : next.pool_options) {
        std::shared_ptr<fastcgi::UpstreamPool> pool;
        for (size_t i = 0; previous && i < previous->pools.size() && !pool; ++i)
            if (previous->pools[i]->options() == options) pool = previous->pools[i];
        if (!pool) pool = std::make_shared<fastcgi::UpstreamPool>(reactor, options, &gauges);
        next.pools.push_back(std::move(pool));
    }
    make_groups(next.fastcgi_specs, next.pools, next.fastcgi_groups);
    adopt_proxy_pools(next, previous, reactor, proxy_gauges);
}

void close_unshared_pools(ServingSet& set) {
    // Requests hold their set, so a pool nobody else shares has no client: what
    // is left are idle connections and abandoned responses being drained. The
    // groups hold references too: let them go first.
    set.fastcgi_groups.clear();
    for (auto& pool : set.pools)
        if (pool.use_count() == 1) pool->close_all();
    close_unshared_proxy_pools(set);
}

} // namespace lepus
