#include "server/router.h"

#include "acme/http_challenges.h"
#include "base/ascii.h"
#include "fastcgi/fastcgi_exchange.h"
#include "http/exchange_log.h"
#include "http/path.h"
#include "log/access_log.h"
#include "log/error_log.h"
#include "net/tls_listen_scheme.h"
#include "server/auth_stream.h"
#include "server/response_filters.h"
#include "server/status_handler.h"
#include "server/worker.h"
#include "server/x_accel.h"

namespace lepus {
namespace {

// --real-ip-from without --proxy-protocol: the client a trusted proxy names in
// X-Forwarded-For, per request (a proxy's keepalive connection carries many
// clients), as nginx's real_ip_recursive on: the exchange's client, never the
// connection's (HTTP/2 streams of one connection run side by side).
void apply_forwarded_for(const ServerOptions& options, Exchange& exchange) {
    if (options.trusted_proxies.empty() || options.proxy_protocol) return;
    std::string_view values[8]; // beyond eight lines, the last eight (nearest the proxy)
    size_t count = 0;
    for (const Header& header : exchange.request->headers) {
        if (!ascii_iequals(header.name, "X-Forwarded-For")) continue;
        if (count == std::size(values)) {
            std::move(values + 1, values + count, values);
            --count;
        }
        values[count++] = header.value;
    }
    exchange.client =
        options.trusted_proxies.client_of(exchange.connection->socket_peer, {values, count});
}

// A ScriptTarget whose views it owns: the resolver and the router's scratch
// strings serve other requests while a buffered body arrives.
class OwnedScriptTarget {
public:
    explicit OwnedScriptTarget(const fastcgi::ScriptTarget& target)
        : document_root_(target.document_root), script_name_(target.script_name),
          path_info_(target.path_info), script_filename_(target.script_filename),
          server_name_(target.server_name), rewritten_path_(target.rewritten_path),
          rewritten_query_(target.rewritten_query), extra_params_(target.extra_params),
          internal_redirect_(target.internal_redirect), rewritten_(target.rewritten) {}

    fastcgi::ScriptTarget view() const {
        return {document_root_,     script_name_, path_info_,      script_filename_, server_name_,
                internal_redirect_, rewritten_,   rewritten_path_, rewritten_query_, extra_params_};
    }

private:
    std::string document_root_, script_name_, path_info_, script_filename_, server_name_;
    std::string rewritten_path_, rewritten_query_;
    std::span<const fastcgi::CgiParam> extra_params_; // the site's, held by the serving set
    bool internal_redirect_, rewritten_;
};

} // namespace

// A refused symlink, a file that cannot be read: the site is read when a line
// is written, so lines before the site is chosen have none.
LogContext route_log_context(const Exchange& exchange) {
    return {[](const void* data, std::string& out) {
                const auto& exchange = *static_cast<const Exchange*>(data);
                const SiteHandlers* site = exchange.route ? exchange.route->site : nullptr;
                append_exchange_context(exchange, site ? site->name() : std::string_view(), {},
                                        out);
            },
            &exchange};
}

Router::Router(Worker& worker, const ServerOptions& options)
    : worker_(worker), auth_(worker.reactor()) {
    std::string error; // the options were checked when they were read
    for (const std::string& text : options.status_allow)
        if (auto network = parse_cidr(text, error)) status_allow_.push_back(*network);
    // RFC 9114 §3.1.1: HTTPS answers advertise HTTP/3 on the first quic:// listener's port.
    if (!options.quic_listen.empty()) {
        std::string_view address = split_listen_scheme(options.quic_listen.front()).address;
        alt_svc_ = "h3=\":" + std::string(address.substr(address.rfind(':') + 1)) + "\"";
    }
}

// The order of the steps is the order of nginx's phases: who the client is and
// which site it asks, the server's own page, redirects (https_redirect first, so
// that no password is asked for over plain HTTP), the limits (nginx's preaccess:
// limit_conn, limit_req, so that a refused client is counted too), access
// (allow/deny, then basic auth), then the content handlers, the internal
// folder and the backend before the files.
//
// The list is a switch whose cases fall through, one per step, rather than a
// table of member pointers: each step's early "not for this request" test is
// then inlined into one function. The table cost 260 instructions a request
// more than the router before the steps (callgrind, HTTP/1.1 keepalive `/`).

RouteState& Router::route_of(Exchange& exchange) {
    if (exchange.route) return *exchange.route;
    std::unique_ptr<RouteState> route;
    if (spare_routes_.empty()) {
        route = std::make_unique<RouteState>();
    } else {
        route = std::move(spare_routes_.back());
        spare_routes_.pop_back();
    }
    // Owned through exchange.route until finish() gives it back to the pool.
    exchange.route = {route.release(), [](RouteState* state) { delete state; }};
    return *exchange.route;
}

SiteHandlers& Router::site_of(Exchange& exchange, RouteState& route) {
    if (route.site) return *route.site;
    // The set is kept until the exchange ends (SIGHUP may replace it): the
    // site's handlers, backend pool and log live in it.
    route.serving = worker_.serving();
    route.site = &route.serving->for_host(exchange.request->host);
    return *route.site;
}

void Router::start(Exchange& exchange) {
    ScopedLogContext context(route_log_context(exchange));
    ReactorLoad& load = worker_.reactor().load();
    load.requests_total.store(load.requests_total.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
    run_steps(exchange, route_of(exchange), 0);
}

void Router::run_steps(Exchange& exchange, RouteState& route, size_t first) {
    // One case per step, in their order; `step` says which one stopped.
    StepOutcome outcome = StepOutcome::Continue;
    size_t step = first;
    // Each step's first test, whether it applies at all, is made here, so
    // that a step the site does not use costs no call.
    const ServerOptions& options = worker_.options();
#define LEPUS_STEP(n, applies, call)                                                               \
    case n:                                                                                        \
        step = n;                                                                                  \
        if ((applies) && (outcome = call(exchange, route)) != StepOutcome::Continue) break;        \
        [[fallthrough]]
    switch (first) {
        LEPUS_STEP(0, !options.trusted_proxies.empty() && !options.proxy_protocol, step_client);
        LEPUS_STEP(1, true, step_site);
        LEPUS_STEP(2, acme::HttpChallenges::process().answering(), step_acme_challenge);
        LEPUS_STEP(3, !options.status_path.empty(), step_status_page);
        LEPUS_STEP(4, route.site->config || route.site->https_redirect, step_redirects);
        // Whose limits and auth apply: a site without locations never looks.
        LEPUS_STEP(5, route.site->uses.locations, step_find_location);
        // The rule steps run for a site that has such rules, its own or a
        // location's (SiteHandlers::uses): one test each for any other.
        LEPUS_STEP(6, options.conn_limit || route.site->uses.conn_limit, step_conn_limit);
        LEPUS_STEP(7, route.site->uses.limits, step_rate_limit);
        LEPUS_STEP(8, route.site->uses.access, step_allow_deny);
        LEPUS_STEP(9, route.site->uses.auth, step_access);
        LEPUS_STEP(10, route.site->x_accel, step_internal);
        LEPUS_STEP(11, route.location, step_location);
        LEPUS_STEP(12, route.site->proxy, step_proxy);
        LEPUS_STEP(13, route.site->uses.try_files, step_try_files);
    case 14:
        step = 14;
        outcome = step_handler(exchange, route);
        break;
    default:
        return;
    }
#undef LEPUS_STEP
    if (outcome == StepOutcome::Pending) {
        // The step runs again when its wait is over (resume()).
        route.next_step = uint8_t(step);
        return;
    }
    if (outcome == StepOutcome::Answered) answered(exchange, route);
}

void Router::answered(Exchange& exchange, RouteState& route) {
    // The status page answers before a site is needed; every other answer is the site's.
    if (route.site && route.site->uses.headers) add_rule_headers(exchange, route);
    if (!alt_svc_.empty() && exchange.connection->secure && exchange.request &&
        exchange.request->version_major < 3) {
        if (exchange.stream)
            exchange.stream_fields.add("Alt-Svc", alt_svc_);
        else if (exchange.response.head.status != 0)
            exchange.response.head.add("Alt-Svc", alt_svc_);
    }
}

Router::StepOutcome Router::step_client(Exchange& exchange, RouteState&) {
    apply_forwarded_for(worker_.options(), exchange);
    return StepOutcome::Continue;
}

Router::StepOutcome Router::step_site(Exchange& exchange, RouteState& route) {
    site_of(exchange, route);
    worker_.publish_cache_stats();
    return StepOutcome::Continue;
}

Router::StepOutcome Router::step_status_page(Exchange& exchange, RouteState&) {
    const std::string& status_path = worker_.options().status_path;
    if (status_path.empty() || exchange.request->path != status_path) return StepOutcome::Continue;
    serve_status(worker_, status_allow_, exchange);
    return StepOutcome::Answered;
}

// The X-Accel folder is internal (nginx's `internal`): clients get 404.
Router::StepOutcome Router::step_internal(Exchange& exchange, RouteState& route) {
    const SiteHandlers& site = *route.site;
    if (!site.x_accel || decode_path(exchange.request->path, path_) != 0 ||
        !path_.starts_with(site.x_accel->prefix))
        return StepOutcome::Continue;
    if (exchange.request->has_body()) exchange.keep_alive = false;
    build_error_response(404, reply_context(exchange), exchange.response);
    apply_error_page(exchange, route, 404);
    return StepOutcome::Answered;
}

Router::StepOutcome Router::step_proxy(Exchange& exchange, RouteState& route) {
    if (!route.site->proxy || !route_to_proxy(exchange, route)) return StepOutcome::Continue;
    return StepOutcome::Answered;
}

Router::StepOutcome Router::step_handler(Exchange& exchange, RouteState& route) {
    route_request(exchange, route, *exchange.request, false);
    return StepOutcome::Answered;
}

// nginx's try_files: the candidates are checked on the decoded path, with the
// files' confinement (StaticHandler::probe); the first that exists is served
// as if it had been asked for, and the fallback takes every other request.
// A candidate the files refuse (a link --symlinks refuses) is routed too, so
// that it gets the 403 and the warn line it gets without try_files: falling
// through to a front controller's 404 page would hide why (issue 31).
Router::StepOutcome Router::step_try_files(Exchange& exchange, RouteState& route) {
    SiteHandlers& site = *route.site;
    const Request& request = *exchange.request;
    // "OPTIONS *" and undecodable paths: the handlers' own answers (204, 400).
    const std::optional<TryFiles>& try_files = route.location && route.location->own->try_files
                                                   ? route.location->own->try_files
                                                   : site.try_files;
    if (!try_files || request.path == "*" || decode_path(request.path, path_) != 0)
        return StepOutcome::Continue;
    return try_candidates(exchange, route, *try_files);
}

Router::StepOutcome Router::try_candidates(Exchange& exchange, RouteState& route,
                                           const TryFiles& try_files) {
    const Request& request = *exchange.request;
    const std::vector<TryFiles::Candidate>& candidates = try_files.candidates;
    for (size_t i = 0; i + 1 < candidates.size(); ++i) {
        TryFiles::expand_path(candidates[i], path_, candidate_);
        // A folder test when the template ends in "/" ("$uri/"), as nginx
        // decides: "$uri" is a file test, even for "/apps/files/".
        bool want_directory = candidates[i].wants_directory();
        StaticHandler::Probe found = probe(route, candidate_, exchange.now_ms);
        if (found != StaticHandler::Probe::Refused &&
            found !=
                (want_directory ? StaticHandler::Probe::Directory : StaticHandler::Probe::File) &&
            (want_directory || !is_script_with_path_info(route, candidate_)))
            continue;
        // The request as it is; or a directory named without its slash, which
        // the files answer with their usual 301 to it (relative links work).
        if (candidate_ == path_ || (want_directory && candidate_.size() == path_.size() + 1 &&
                                    candidate_.starts_with(path_)))
            return StepOutcome::Continue;
        return rewrite(exchange, route, candidate_, request.query, request);
    }
    const TryFiles::Candidate& fallback = candidates.back();
    if (fallback.status) {
        if (request.has_body()) exchange.keep_alive = false; // its body stays unread
        build_error_response(fallback.status, reply_context(exchange), exchange.response);
        apply_error_page(exchange, route, fallback.status);
        return StepOutcome::Answered;
    }
    TryFiles::expand_path(fallback, path_, candidate_);
    std::string query;
    if (fallback.has_query)
        TryFiles::expand_query(fallback, path_, request.query, query);
    else
        query.assign(request.query);
    return rewrite(exchange, route, candidate_, query, request);
}

// "/remote.php/dav/x" is found when /remote.php is a script of the site (or
// refused: its 403 is said, as for a file), as nginx's `location ~
// \.php(/|$)` takes it before try_files. Under a location with a root of its
// own, the location's files decide alone.
bool Router::is_script_with_path_info(RouteState& route, std::string_view decoded_path) {
    const SiteHandlers& site = *route.site;
    if (!site.scripts) return false;
    if (site.uses.locations)
        if (const LocationHandlers* location = find_location(site, decoded_path);
            location && location->files)
            return false;
    return site.scripts->script_with_path_info(decoded_path) != fastcgi::RouteKind::Static;
}

Router::StepOutcome Router::rewrite(Exchange& exchange, RouteState& route,
                                    std::string_view decoded_path, std::string_view query,
                                    const Request& request) {
    // The path it goes to may be protected where the client's is not (nginx
    // runs the access phase again after try_files' internal redirect).
    if (!authorize(exchange, route, decoded_path))
        return exchange.stream ? StepOutcome::Pending : StepOutcome::Answered;
    rewritten_path_.clear();
    append_percent_encoded(decoded_path, rewritten_path_);
    rewritten_query_.assign(query);
    Request rewritten = request;
    rewritten.path = rewritten_path_;
    rewritten.query = rewritten_query_;
    // A path rewritten into a location with a root of its own is its files'.
    if (route.site->uses.locations)
        if (const LocationHandlers* location = find_location(*route.site, decoded_path);
            location && location->files) {
            path_.assign(decoded_path); // serve_location's decoded path
            serve_location(exchange, route, *location, rewritten, true);
            return StepOutcome::Answered;
        }
    route_request(exchange, route, rewritten, true);
    return StepOutcome::Answered;
}

void Router::route_request(Exchange& exchange, RouteState& route, const Request& request,
                           bool rewritten) {
    SiteHandlers& site = *route.site;
    if (fastcgi::ScriptResolver* scripts = site.scripts.get()) {
        switch (scripts->route(request, exchange.now_ms)) {
        case fastcgi::RouteKind::Static:
            break;
        case fastcgi::RouteKind::Error:
            // The body of a request for a script that cannot run stays unread.
            if (request.has_body()) exchange.keep_alive = false;
            build_error_response(scripts->status(), reply_context(exchange), exchange.response);
            return apply_error_page(exchange, route, scripts->status());
        case fastcgi::RouteKind::Script: {
            fastcgi::ScriptTarget target{scripts->document_root(),
                                         scripts->script_name(),
                                         scripts->path_info(),
                                         scripts->script_filename(),
                                         {}};
            if (rewritten) {
                target.rewritten = true;
                target.rewritten_path = request.path;
                target.rewritten_query = request.query;
            }
            return run_script(exchange, route, target);
        }
        }
    }
    site.files->handle(request, exchange.keep_alive, exchange.now_ms, exchange.response);
    if (exchange.response.head.status >= 400)
        apply_error_page(exchange, route, exchange.response.head.status);
}

void Router::run_script(Exchange& exchange, RouteState& route, fastcgi::ScriptTarget target) {
    SiteHandlers& site = *route.site;
    std::string server_name;
    if (site.config && !site.config->server_names.empty())
        server_name = site.config->server_names.front();
    else
        exchange.connection->local().format_host(server_name);
    target.server_name = server_name;
    target.extra_params = site.fastcgi_params;
    upstream::Group& pool = route.serving->fastcgi_of(site);
    route.upstream_started_ms = exchange.now_ms;
    if (buffers_request_body(exchange, site)) {
        // php-fpm gets the request once its body is here: a child is
        // not held by a client that sends slowly (issue 32).
        exchange.stream = std::make_unique<BufferedBodyStream>(
            [&pool, &exchange, owned = OwnedScriptTarget(target)] {
                return std::make_unique<fastcgi::FastCgiExchange>(pool, exchange, owned.view());
            },
            *site.body_buffer);
    } else {
        exchange.stream = std::make_unique<fastcgi::FastCgiExchange>(pool, exchange, target);
        exchange.body_holds_backend = true; // --min-body-rate applies
    }
    // X-Accel-Redirect / X-Sendfile (the files answer instead: redirect()), compression.
    wrap_response_stream(exchange, site, StreamOrigin::Script);
}

// A script's X-Accel-Redirect (or X-Sendfile, turned into a URI under the
// prefix by XAccelStream, which refused unsafe targets): the file is served
// as a GET of that URI, with the client's conditional and range headers, from
// the internal folder or the site's own files; the script's kept header lines
// replace the file's. As nginx's internal redirect, the target's basic auth
// applies; unlike it, a target the site's scripts would run is refused (502),
// so that a script's answer never serves a script's source.
void Router::serve_x_accel(Exchange& exchange, RouteState& route) {
    SiteHandlers& site = *route.site;
    std::string target = std::move(route.redirect_target);
    route.redirect_target.clear();
    std::string_view uri = target, query;
    if (size_t mark = uri.find('?'); mark != std::string_view::npos) {
        query = uri.substr(mark + 1);
        uri = uri.substr(0, mark);
    }
    Request fetch = *exchange.request;
    if (!fetch.is_head()) {
        fetch.method = Method::Get;
        fetch.method_text = "GET";
    }
    fetch.target = target;
    fetch.path = uri;
    fetch.query = query;
    fetch.content_length.reset();
    fetch.chunked = false;
    if (decode_path(uri, path_) != 0) return refuse_x_accel(exchange, route, target, "undecodable");
    StaticHandler* files = site.files.get();
    std::string inner; // the path below the internal folder, still encoded
    if (site.x_accel && path_.starts_with(site.x_accel->prefix)) {
        inner = "/";
        append_percent_encoded(std::string_view(path_).substr(site.x_accel->prefix.size()), inner);
        fetch.path = inner;
        files = site.x_accel_files.get();
    } else if (site.scripts &&
               site.scripts->route(fetch, exchange.now_ms) != fastcgi::RouteKind::Static) {
        return refuse_x_accel(exchange, route, target, "a script of the site, not a file");
    }
    if (!authorize(exchange, route, path_)) {
        // An AuthStream waits for the verifier: resume() serves the target.
        if (exchange.stream) {
            route.redirect_target = std::move(target);
            route.next_step = kRedirectStep;
        }
        return;
    }
    files->handle(fetch, exchange.keep_alive, exchange.now_ms, exchange.response);
    Response& response = exchange.response;
    if (response.head.status >= 400) return apply_error_page(exchange, route, response.head.status);
    replace_fields(route.redirect_fields, response.head);
}

void Router::refuse_x_accel(Exchange& exchange, RouteState& route, std::string_view target,
                            const char* why) {
    const Request& request = *exchange.request;
    log_error(R"(the answer to "%.*s" named the file "%.*s", which is refused (%s): 502)",
              int(request.target.size()), request.target.data(), int(target.size()), target.data(),
              why);
    build_error_response(502, reply_context(exchange), exchange.response);
    apply_error_page(exchange, route, 502);
}

void Router::add_rule_headers(Exchange& exchange, RouteState& route) {
    const SiteHandlers& site = *route.site;
    // A location's own rules (route.location is set only for a site with locations).
    const SiteConfig* own =
        route.location && !route.location->own->headers.empty() ? route.location->own : nullptr;
    // Matched on the decoded, normalised path: "/%70rivate/x", "//private/x"
    // and "/./private/x" are "/private/x" to the files, and so to the rules.
    if (decode_path(exchange.request->path, path_) != 0) return; // a 400: no site rules
    if (exchange.stream)
        return lepus::add_rule_headers(*site.config, path_, exchange.stream_fields, own);
    if (exchange.response.head.status == 0) return; // no answer to add to
    lepus::add_rule_headers(*site.config, path_, exchange.response.head, own);
}

void Router::fail(Exchange& exchange, int status, const ResponseHead* extra) {
    ScopedLogContext context(route_log_context(exchange));
    RouteState& route = route_of(exchange);
    site_of(exchange, route);
    build_error_response(status, reply_context(exchange), exchange.response);
    if (extra) {
        extra->for_each([&](std::string_view name, std::string_view value) {
            exchange.response.head.add(name, value);
        });
    }
    apply_error_page(exchange, route, status);
    answered(exchange, route);
}

void Router::redirect(Exchange& exchange) {
    ScopedLogContext context(route_log_context(exchange));
    RouteState& route = route_of(exchange);
    site_of(exchange, route);
    serve_x_accel(exchange, route);
    answered(exchange, route);
}

void Router::finish(Exchange& exchange) {
    if (exchange.route) {
        exchange.route->reset();
        spare_routes_.emplace_back(exchange.route.release());
    }
    exchange.internal_redirects = 0;
    exchange.remote_user.clear();
}

AccessLogExtras Router::log_extras(const Exchange& exchange) {
    AccessLogExtras extras;
    const ConnectionInfo& connection = *exchange.connection;
    uint64_t now_ms = worker_.reactor().now_ms();
    if (exchange.now_ms && now_ms >= exchange.now_ms)
        extras.request_time_ms = now_ms - exchange.now_ms;
    const RouteState* route = exchange.route.get();
    if (route && route->upstream_started_ms && now_ms >= route->upstream_started_ms)
        extras.upstream_time_ms = now_ms - route->upstream_started_ms;
    if (const Request* request = exchange.request) {
        std::string_view host = request->host;
        size_t colon = host.rfind(':');
        if (colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos)
            host = host.substr(0, colon);
        extras.host = host;
    }
    extras.ssl_protocol = connection.secure ? connection.tls_protocol : std::string_view();
    extras.scheme = connection.secure ? "https" : "http";
    if (exchange.protocol == "HTTP/2.0") extras.http2 = connection.secure ? "h2" : "h2c";
    return extras;
}

void Router::account(Exchange& exchange, int status, uint64_t body_bytes) {
    WorkerStats& stats = worker_.stats();
    WorkerStats::bump(stats.requests);
    WorkerStats::bump(stats.bytes_sent, body_bytes);
    if (status >= 100 && status < 600) WorkerStats::bump(stats.responses[size_t(status)]);
    // nginx's access_log per server: the site's own file, else the global one.
    const SiteHandlers* site = exchange.route ? exchange.route->site : nullptr;
    AsyncLogger& log = site && site->access_log ? *site->access_log : worker_.access_log();
    if (!log.enabled()) return;
    AccessLogEntry entry{};
    std::string host;
    exchange.client.format_host(host);
    entry.remote_addr = host;
    // nginx's $remote_user: the name the client gave, even when refused.
    entry.remote_user = supplied_user(exchange);
    entry.time = worker_.reactor().now_s();
    entry.status = status;
    entry.bytes_sent = body_bytes;
    if (const Request* request = exchange.request) {
        entry.method = request->method_text;
        entry.target = request->target;
        entry.protocol = exchange.protocol;
        entry.referer = request->referer;
        entry.user_agent = request->user_agent;
    } else {
        entry.unparsed_line = exchange.request_line;
    }
    log_line_.clear();
    const AccessLogFormat* format = site ? site->log_format : nullptr;
    if (!site && exchange.route && exchange.route->serving)
        format = exchange.route->serving->access_log_format.get();
    else if (!site)
        format = worker_.serving()->access_log_format.get();
    if (!format || format->kind() == AccessLogFormat::Kind::Combined)
        append_combined_line(entry, log_line_); // the default, kept on its fast path
    else
        format->append(entry, log_extras(exchange), log_line_);
    log.append(log_line_);
}

} // namespace lepus
