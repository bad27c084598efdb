// The router's per-client steps: conn limit, rate limit, allow/deny (nginx's
// limit_conn, limit_req and access modules; server/limits.h).
#include "http/path.h"
#include "log/error_log.h"
#include "log/log_escape.h"
#include "server/delay_stream.h"
#include "server/limits.h"
#include "server/router.h"
#include "server/serving_set.h"
#include "server/worker.h"

namespace lepus {
namespace {

// --conn-limit's keys in the client table (a site's own conn_limit has a zone of its own).
constexpr uint32_t kGlobalConnZone = 1;

std::string_view site_name(const SiteHandlers& site) {
    if (!site.config || site.config->server_names.empty()) return {};
    return site.config->server_names.front();
}

} // namespace

void Router::refuse(Exchange& exchange, RouteState& route, int status,
                    unsigned retry_after_seconds) {
    // The body of a refused request stays unread: the connection cannot go on.
    if (exchange.request->has_body()) exchange.keep_alive = false;
    build_error_response(status, reply_context(exchange), exchange.response);
    if (retry_after_seconds != 0)
        exchange.response.head.add("Retry-After", std::to_string(retry_after_seconds));
    apply_error_page(exchange, route, status);
}

void Router::log_refusal(const Exchange& exchange, const RouteState& route, std::string_view what) {
    // nginx's form, which fail2ban's filters read: "*N what, client: ..., server:
    // ..., request: "...", host: "..."" (the context, http/exchange_log.h, escapes
    // the client's bytes: a quote in a target or a Host cannot forge a field).
    ScopedLogContext context(route_log_context(exchange));
    log_error("*%d %.*s", exchange.connection->fd, int(what.size()), what.data());
}

// The decoded, normalised path the rules match, without a copy for the
// common path that needs no decoding (a request to a site with limits pays
// that per step); nullopt for an undecodable one (the files answer 400).
std::optional<std::string_view> Router::rule_path(const Request& request) {
    if (is_normal_path(request.path)) return request.path;
    if (request.path == "*" || decode_path(request.path, path_) != 0) return std::nullopt;
    return std::string_view(path_);
}

// nginx's limit_conn: requests in progress per client address (a keepalive
// connection between requests is not one; each HTTP/2 stream is), 503 above.
Router::StepOutcome Router::step_conn_limit(Exchange& exchange, RouteState& route) {
    if (route.conn_slot.held()) return StepOutcome::Continue;
    // A location's own conn_limit replaces the site's (run_steps calls this
    // step when the site, one of its locations or --conn-limit sets one).
    const SiteConfig* config = route.location && route.location->own->conn_limit
                                   ? route.location->own
                                   : route.site->config;
    bool own = config && config->conn_limit;
    unsigned limit = own ? config->conn_limit : worker_.options().conn_limit;
    if (limit == 0) return StepOutcome::Continue; // a location's limit, not this path's
    ClientTable& table = *worker_.shared().clients;
    ClientTable::Key key =
        ClientTable::key_of(exchange.client, own ? config->conn_zone : kGlobalConnZone);
    bool log = false;
    if (table.acquire(key, limit, worker_.reactor().now_ms(), &log)) {
        route.conn_slot.hold(table, key);
        return StepOutcome::Continue;
    }
    table.count_refusal(site_name(*route.site), ClientTable::Refusal::Connections);
    if (log) // as the rate's: one line per client per ClientTable::kLogIntervalMs
        log_refusal(exchange, route,
                    "limiting connections to " + std::to_string(limit) + " per client");
    refuse(exchange, route, 503, 1);
    return StepOutcome::Answered;
}

// nginx's limit_req: a leaky bucket per client and rule (ClientTable).
Router::StepOutcome Router::step_rate_limit(Exchange& exchange, RouteState& route) {
    if (route.rate_checked) return StepOutcome::Continue;
    std::optional<std::string_view> path = rule_path(*exchange.request);
    // A location's own limits replace the site's.
    const SiteConfig& rules = route.location && !route.location->own->limits.empty()
                                  ? *route.location->own
                                  : *route.site->config;
    const LimitRule* rule = path ? find_limit_rule(rules, *path) : nullptr;
    if (!rule) return StepOutcome::Continue;
    route.rate_checked = true;
    ClientTable& table = *worker_.shared().clients;
    ClientTable::RateVerdict verdict =
        table.take_request(ClientTable::key_of(exchange.client, rule->zone), rule->rate,
                           rule->burst, rule->nodelay, worker_.reactor().now_ms());
    if (verdict.pass && verdict.delay_ms == 0) return StepOutcome::Continue;
    if (verdict.pass) {
        // Within the burst: served once the bucket has leaked, by a timer
        // on this reactor's wheel (DelayStream), never by waiting here.
        Reactor& reactor = worker_.reactor();
        exchange.stream = std::make_unique<DelayStream>(*this, exchange, reactor.timers(),
                                                        reactor.now_ms() + verdict.delay_ms);
        return StepOutcome::Pending;
    }
    table.count_refusal(site_name(*route.site), ClientTable::Refusal::Requests);
    // One line per client and rule per ClientTable::kLogIntervalMs, not one
    // per refused request: a flood must not fill the disk.
    if (verdict.log) {
        log_refusal(exchange, route, "limiting requests by the limits rule at " + rule->origin);
    }
    refuse(exchange, route, rule->status, retry_after_seconds(verdict.retry_after_ms));
    return StepOutcome::Answered;
}

// nginx's allow / deny, on the client address after the real-IP rules.
Router::StepOutcome Router::step_allow_deny(Exchange& exchange, RouteState& route) {
    std::optional<std::string_view> path = rule_path(*exchange.request);
    // A location's own rules replace the site's.
    const SiteConfig& rules = route.location && !route.location->own->access.empty()
                                  ? *route.location->own
                                  : *route.site->config;
    const AccessRule* rule = path ? find_access_rule(rules, *path) : nullptr;
    if (!rule || access_allows(*rule, exchange.client)) return StepOutcome::Continue;
    log_refusal(exchange, route, "access forbidden by rule");
    refuse(exchange, route, 403);
    return StepOutcome::Answered;
}

void Router::resume_delayed(Exchange& exchange) {
    ScopedLogContext context(route_log_context(exchange));
    RouteState& route = route_of(exchange);
    run_steps(exchange, route, route.next_step);
}

} // namespace lepus
