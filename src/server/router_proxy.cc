// The router's reverse-proxy route: which requests a site's HTTP backend
// answers (nginx's `location /api/ { proxy_pass ...; }`, or `try_files $uri
// @app` with `location @app { proxy_pass ...; }` for a site without paths).
#include "http/path.h"
#include "server/response_filters.h"
#include "server/router.h"
#include "server/serving_set.h"

namespace lepus {

bool Router::route_to_proxy(Exchange& exchange, RouteState& state) {
    SiteHandlers& site = *state.site;
    const ProxyRoute& route = *site.proxy;
    const Request& request = *exchange.request;
    // Undecodable paths and "OPTIONS *": the files' own answers (400, 204).
    if (request.path == "*" || decode_path(request.path, path_) != 0) return false;
    if (route.paths.empty()) {
        // Static files first: a file that exists is served by lepus, and one
        // the files refuse (a link --symlinks refuses) gets their 403, not
        // the backend (as try_files does, issue 31).
        StaticHandler::Probe found = site.files->probe(path_, exchange.now_ms);
        if (found == StaticHandler::Probe::File || found == StaticHandler::Probe::Refused)
            return false;
    } else {
        bool match = false;
        for (const std::string& prefix : route.paths)
            match = match || path_.starts_with(prefix);
        if (!match) return false;
    }
    proxy_to(exchange, state, route);
    return true;
}

void Router::proxy_to(Exchange& exchange, RouteState& state, const ProxyRoute& route) {
    SiteHandlers& site = *state.site;
    proxy::BackendGroup& group = state.serving->proxy_groups[route.group];
    state.upstream_started_ms = exchange.now_ms; // the access log's $upstream_response_time
    if (buffers_request_body(exchange, site)) {
        // The backend connection is taken once the body is here (nginx's
        // proxy_request_buffering on): slow clients cannot empty the pool.
        exchange.stream = std::make_unique<BufferedBodyStream>(
            [&group, &exchange, &route, &site] {
                return std::make_unique<proxy::ProxyExchange>(
                    group, exchange, proxy::ProxyTarget{route.host, site.name()});
            },
            *site.body_buffer);
    } else {
        exchange.stream = std::make_unique<proxy::ProxyExchange>(
            group, exchange, proxy::ProxyTarget{route.host, site.name()});
        exchange.body_holds_backend = true; // --min-body-rate applies
    }
    // The same response filters as a script's: X-Accel-Redirect, compression.
    wrap_response_stream(exchange, site, StreamOrigin::Proxy);
}

} // namespace lepus
