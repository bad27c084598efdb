#include "server/router.h"

#include "base/ascii.h"
#include "fastcgi/fastcgi_exchange.h"
#include "http/path.h"
#include "log/access_log.h"
#include "log/error_log.h"
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
          rewritten_query_(target.rewritten_query), internal_redirect_(target.internal_redirect),
          rewritten_(target.rewritten) {}

    fastcgi::ScriptTarget view() const {
        return {document_root_,     script_name_, path_info_,      script_filename_, server_name_,
                internal_redirect_, rewritten_,   rewritten_path_, rewritten_query_};
    }

private:
    std::string document_root_, script_name_, path_info_, script_filename_, server_name_;
    std::string rewritten_path_, rewritten_query_;
    bool internal_redirect_, rewritten_;
};

ReplyContext reply_context(const Exchange& exchange) {
    const Request& request = *exchange.request;
    return ReplyContext{exchange.now_s, exchange.keep_alive, request.is_head(),
                        request.version_minor};
}

} // namespace

Router::Router(Worker& worker, const ServerOptions& options)
    : worker_(worker), auth_(worker.reactor()) {
    std::string error; // the options were checked when they were read
    for (const std::string& text : options.status_allow)
        if (auto network = parse_cidr(text, error)) status_allow_.push_back(*network);
}

// The order of the steps is the order of nginx's phases: who the client is and
// which site it asks, the server's own page, redirects (https_redirect first, so
// that no password is asked for over plain HTTP), access (basic auth), then the
// content handlers, the internal folder and the backend before the files.
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
        LEPUS_STEP(2, !options.status_path.empty(), step_status_page);
        LEPUS_STEP(3, route.site->config, step_redirects);
        LEPUS_STEP(4, route.site->config && !route.site->config->auth.empty(), step_access);
        LEPUS_STEP(5, route.site->x_accel, step_internal);
        LEPUS_STEP(6, route.site->proxy, step_proxy);
        LEPUS_STEP(7, route.site->try_files, step_try_files);
    case 8:
        step = 8;
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
    if (route.site) add_rule_headers(exchange, *route.site);
}

void Router::resume(Exchange& exchange, bool granted, std::string_view user, const AuthRule& rule) {
    RouteState& route = route_of(exchange);
    if (!granted) {
        site_of(exchange, route);
        answer_unauthorized(exchange, route, rule);
        return answered(exchange, route);
    }
    route.granted = &rule;
    exchange.remote_user.assign(user);
    if (route.next_step == kRedirectStep) {
        serve_x_accel(exchange, route);
        return answered(exchange, route);
    }
    run_steps(exchange, route, route.next_step);
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

Router::StepOutcome Router::step_redirects(Exchange& exchange, RouteState& route) {
    SiteHandlers& site = *route.site;
    if (redirect_to_https(exchange, site) || serve_redirect(exchange, site))
        return StepOutcome::Answered;
    return StepOutcome::Continue;
}

// As nginx's access phase: after the redirects, before any handler.
Router::StepOutcome Router::step_access(Exchange& exchange, RouteState& route) {
    const SiteHandlers& site = *route.site;
    if (!site.config || site.config->auth.empty() || exchange.request->path == "*")
        return StepOutcome::Continue;
    if (decode_path(exchange.request->path, path_) != 0) {
        build_error_response(400, reply_context(exchange), exchange.response);
        return StepOutcome::Answered;
    }
    if (authorize(exchange, route, path_)) return StepOutcome::Continue;
    return exchange.stream ? StepOutcome::Pending : StepOutcome::Answered;
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

// The site's `https_redirect`, as nginx's `return 301 https://$host$request_uri`
// on the port-80 server: the same host (its port dropped) and target over TLS.
bool Router::redirect_to_https(Exchange& exchange, SiteHandlers& site) {
    if (!site.config || site.config->https_redirect == 0 || exchange.connection->secure)
        return false;
    const Request& request = *exchange.request;
    std::string_view host = request.host;
    if (host.empty()) return false; // HTTP/1.0 without Host: nothing to name
    // The parser checked the authority's characters; strip its port ("[v6]:80" too).
    size_t colon = host.rfind(':');
    if (colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos)
        host = host.substr(0, colon);
    std::string location = "Location: https://";
    location.append(host);
    if (site.config->https_redirect != 443) {
        location.push_back(':');
        location.append(std::to_string(site.config->https_redirect));
    }
    // The absolute form's path and query, or the origin form as sent.
    std::string_view target = request.target;
    if (!target.starts_with('/')) {
        size_t path = target.find('/', target.find("//") + 2);
        target = path == std::string_view::npos ? "/" : target.substr(path);
    }
    location.append(target).append("\r\n");
    build_error_response(301, reply_context(exchange), exchange.response, location);
    return true;
}

bool Router::serve_redirect(Exchange& exchange, SiteHandlers& site) {
    if (!site.config || site.config->redirects.empty()) return false;
    if (decode_path(exchange.request->path, path_) != 0) return false; // the files answer 400
    const Redirect* redirect = find_redirect(*site.config, path_);
    if (!redirect) return false;
    std::string location = "Location: " + redirect->to + "\r\n";
    build_error_response(redirect->status, reply_context(exchange), exchange.response, location);
    return true;
}

bool Router::authorize(Exchange& exchange, RouteState& route, std::string_view decoded_path) {
    SiteHandlers& site = *route.site;
    if (!site.config || site.config->auth.empty()) return true;
    const AuthRule* rule = find_auth_rule(*site.config, decoded_path);
    // The verifier granted this rule for this exchange (resume()): the same
    // credentials pass again without another check.
    if (!rule || rule == route.granted) return true;
    std::string_view value;
    int fields = 0;
    for (const Header& header : exchange.request->headers)
        if (ascii_iequals(header.name, "Authorization")) value = header.value, ++fields;
    if (fields > 1) {
        // Which one would a script believe? nginx refuses the request alike.
        build_error_response(400, reply_context(exchange), exchange.response);
        return false;
    }
    // Malformed credentials get 401 as missing ones do (as nginx): the client
    // is asked again instead of being told its request cannot be repeated.
    std::optional<BasicCredentials> credentials;
    if (fields == 1) credentials = parse_basic_credentials(value, credentials_);
    if (!credentials) {
        answer_unauthorized(exchange, route, *rule);
        return false;
    }
    std::shared_ptr<AuthCheck> check;
    switch (auth_.check(*rule, *credentials, check)) {
    case BasicAuth::Outcome::Granted:
        exchange.remote_user.assign(credentials->user);
        return true;
    case BasicAuth::Outcome::Denied:
        answer_unauthorized(exchange, route, *rule);
        return false;
    case BasicAuth::Outcome::Busy:
        build_error_response(503, reply_context(exchange), exchange.response, "Retry-After: 1\r\n");
        return false;
    case BasicAuth::Outcome::Pending:
        exchange.stream = std::make_unique<AuthStream>(*this, exchange, *rule,
                                                       std::string(credentials->user), check);
        return false;
    }
    return false;
}

void Router::answer_unauthorized(Exchange& exchange, RouteState& route, const AuthRule& rule) {
    // RFC 7617 §2.1: charset="UTF-8" tells the client how to encode the
    // user and password (the file's bytes are compared as they are).
    std::string challenge =
        "WWW-Authenticate: Basic realm=\"" + rule.realm + "\", charset=\"UTF-8\"\r\n";
    build_error_response(401, reply_context(exchange), exchange.response, challenge);
    apply_error_page(exchange, route, 401);
}

std::string_view Router::supplied_user(const Exchange& exchange) {
    if (!exchange.remote_user.empty() || !exchange.request) return exchange.remote_user;
    for (const Header& header : exchange.request->headers)
        if (ascii_iequals(header.name, "Authorization"))
            if (auto credentials = parse_basic_credentials(header.value, credentials_))
                return credentials->user;
    return {};
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
    if (!site.try_files || request.path == "*" || decode_path(request.path, path_) != 0)
        return StepOutcome::Continue;
    const std::vector<TryFiles::Candidate>& candidates = site.try_files->candidates;
    for (size_t i = 0; i + 1 < candidates.size(); ++i) {
        TryFiles::expand_path(candidates[i], path_, candidate_);
        bool want_directory = candidate_.size() > 1 && candidate_.back() == '/';
        StaticHandler::Probe found = site.files->probe(candidate_, exchange.now_ms);
        if (found != StaticHandler::Probe::Refused &&
            found !=
                (want_directory ? StaticHandler::Probe::Directory : StaticHandler::Probe::File))
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
            std::string server_name;
            if (site.config && !site.config->server_names.empty())
                server_name = site.config->server_names.front();
            else
                exchange.connection->local().format_host(server_name);
            fastcgi::ScriptTarget target{scripts->document_root(), scripts->script_name(),
                                         scripts->path_info(), scripts->script_filename(),
                                         server_name};
            if (rewritten) {
                target.rewritten = true;
                target.rewritten_path = request.path;
                target.rewritten_query = request.query;
            }
            upstream::Group& pool = route.serving->fastcgi_of(site);
            if (buffers_request_body(exchange, site)) {
                // php-fpm gets the request once its body is here: a child is
                // not held by a client that sends slowly (issue 32).
                exchange.stream = std::make_unique<BufferedBodyStream>(
                    [&pool, &exchange, owned = OwnedScriptTarget(target)] {
                        return std::make_unique<fastcgi::FastCgiExchange>(pool, exchange,
                                                                          owned.view());
                    },
                    *site.body_buffer);
            } else {
                exchange.stream =
                    std::make_unique<fastcgi::FastCgiExchange>(pool, exchange, target);
            }
            // X-Accel-Redirect / X-Sendfile (the files answer instead: redirect()), compression.
            return wrap_response_stream(exchange, site, StreamOrigin::Script);
        }
        }
    }
    site.files->handle(request, exchange.keep_alive, exchange.now_s, exchange.now_ms,
                       exchange.response);
    if (exchange.response.status >= 400)
        apply_error_page(exchange, route, exchange.response.status);
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
    files->handle(fetch, exchange.keep_alive, exchange.now_s, exchange.now_ms, exchange.response);
    Response& response = exchange.response;
    if (response.status >= 400) return apply_error_page(exchange, route, response.status);
    replace_header_lines(route.redirect_headers, response.head);
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

void Router::add_rule_headers(Exchange& exchange, SiteHandlers& site) {
    if (!site.config || site.config->headers.empty()) return;
    // Matched on the decoded, normalised path: "/%70rivate/x", "//private/x"
    // and "/./private/x" are "/private/x" to the files, and so to the rules.
    if (decode_path(exchange.request->path, path_) != 0) return; // a 400: no site rules
    rule_lines_.clear();
    append_rule_headers(*site.config, path_, rule_lines_);
    if (exchange.stream) {
        exchange.stream_headers.append(rule_lines_);
        return;
    }
    Response& response = exchange.response;
    if (response.head.size() < 4) return;
    response.head.insert(response.head.size() - 2, rule_lines_); // before the empty line
}

void Router::fail(Exchange& exchange, int status, std::string_view extra_headers) {
    RouteState& route = route_of(exchange);
    site_of(exchange, route);
    build_error_response(status, reply_context(exchange), exchange.response, extra_headers);
    apply_error_page(exchange, route, status);
    answered(exchange, route);
}

void Router::redirect(Exchange& exchange) {
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
    append_combined_line(entry, log_line_);
    log.append(log_line_);
}

} // namespace lepus
