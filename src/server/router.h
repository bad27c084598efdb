// Router: the layer above the protocol engines. Each exchange runs through an
// ordered list of steps (nginx's phases, h2o's handlers per path), each of
// which answers Continue, Answered or Pending:
//   client        the client address after --real-ip-from (X-Forwarded-For)
//   site          the site for the Host, kept alive with its serving set
//   acme          /.well-known/acme-challenge/TOKEN while an order is validated
//   status page   --status-path
//   redirects     https_redirect, then the site's redirects and rewrites
//                 (router_redirects.cc)
//   find location the site's location for the path (router_locations.cc):
//                 its own conn_limit, limits, access, auth and try_files
//                 replace the site's in the steps below (its headers add to them)
//   conn limit    conn_limit / --conn-limit: requests in progress per client
//                 (server/client_table.h), 503 over it
//   rate limit    the site's limits (nginx's limit_req): 429 over the burst,
//                 Pending within it without nodelay (DelayStream), then resumed
//   allow/deny    the site's access rules (server/limits.h): 403
//   access        basic auth (server/basic_auth.h); Pending while a verifier
//                 thread checks a password (AuthStream), then resumed
//   internal      the X-Accel folder is not for clients: 404
//   location      the location's own backend (handler = "proxy"), or files
//                 (or scripts) of its own root (router_locations.cc)
//   proxy         the site's HTTP backend (router_proxy.cc)
//   try_files     rewrite to the first candidate that exists, or the fallback
//   handler       a script (FastCGI) or the static files
// A handler's stream then passes the response filters
// (server/response_filters.h: X-Accel, compression), and every answer,
// complete or streamed, gets the site's header rules and error pages here.
// The access log line is written when the exchange is accounted.
//
// To add a step: a member below and its case in run_steps (router.cc). To add a
// response filter: response_filters.cc. To add a header rule kind:
// site_table.cc (add_rule_headers).
#pragma once

#include "fastcgi/fastcgi_exchange.h"
#include "http/exchange.h"
#include "http/static_handler.h"
#include "log/access_log_format.h"
#include "log/error_log.h"
#include "net/cidr.h"
#include "server/basic_auth.h"
#include "server/options.h"
#include "server/path_pattern.h"
#include "server/route_state.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lepus {

class Worker;
struct LocationHandlers;
struct ProxyRoute;
struct SiteHandlers;
struct TryFiles;

// The location of `site` whose path takes `decoded_path` (an exact one, then
// the longest prefix), or nullptr (router_locations.cc).
const LocationHandlers* find_location(const SiteHandlers& site, std::string_view decoded_path);

// What the error responses of a step need to know of the exchange.
inline ReplyContext reply_context(const Exchange& exchange) {
    return ReplyContext{exchange.keep_alive, exchange.request->is_head()};
}

// The error log's context while the router and the handlers it calls work on
// `exchange` (client, server, request line, host: http/exchange_log.h).
LogContext route_log_context(const Exchange& exchange);

class Router final : public ExchangeHandler {
public:
    // `options` must be the worker's (already checked: --status-allow parses).
    Router(Worker& worker, const ServerOptions& options);

    void start(Exchange& exchange) override;
    void fail(Exchange& exchange, int status, const ResponseHead* extra) override;
    void redirect(Exchange& exchange) override;
    void account(Exchange& exchange, int status, uint64_t body_bytes) override;
    void finish(Exchange& exchange) override;

    // A Pending step's wait is over (an AuthStream's verdict for `rule`):
    // routing goes on where it stopped (as `user`), or answers 401 (and logs
    // why: `unknown_user`, or a password mismatch).
    void resume(Exchange& exchange, bool granted, std::string_view user, const AuthRule& rule,
                bool unknown_user = false);
    // A request delayed by its rate limit (DelayStream) goes on.
    void resume_delayed(Exchange& exchange);

    enum class StepOutcome : uint8_t {
        Continue, // the next step decides
        Answered, // exchange.response or exchange.stream holds the answer
        Pending,  // exchange.stream waits for something; resume() goes on
    };
    // RouteState::next_step for a handler's internal redirect, past the steps.
    static constexpr uint8_t kRedirectStep = 0xff;

private:
    // Runs the steps from `first` until one answers or waits.
    void run_steps(Exchange& exchange, RouteState& route, size_t first);
    // The answer is decided: the site's header rules go on it.
    void answered(Exchange& exchange, RouteState& route);

    // The steps, in their order (the cases of run_steps in router.cc).
    StepOutcome step_client(Exchange& exchange, RouteState& route);
    StepOutcome step_site(Exchange& exchange, RouteState& route);
    StepOutcome step_acme_challenge(Exchange& exchange, RouteState& route); // router_acme.cc
    StepOutcome step_status_page(Exchange& exchange, RouteState& route);
    StepOutcome step_redirects(Exchange& exchange, RouteState& route);
    StepOutcome step_find_location(Exchange& exchange, RouteState& route); // router_locations.cc
    StepOutcome step_conn_limit(Exchange& exchange, RouteState& route);
    StepOutcome step_rate_limit(Exchange& exchange, RouteState& route);
    StepOutcome step_allow_deny(Exchange& exchange, RouteState& route);
    StepOutcome step_access(Exchange& exchange, RouteState& route);
    StepOutcome step_internal(Exchange& exchange, RouteState& route);
    StepOutcome step_location(Exchange& exchange, RouteState& route);
    StepOutcome step_proxy(Exchange& exchange, RouteState& route);
    StepOutcome step_try_files(Exchange& exchange, RouteState& route);
    StepOutcome step_handler(Exchange& exchange, RouteState& route);

    // The route state of an exchange the router started (a fresh one from
    // the pool when it has none yet: fail() before start()).
    RouteState& route_of(Exchange& exchange);
    // The site, chosen once per exchange by its Host (step_site).
    SiteHandlers& site_of(Exchange& exchange, RouteState& route);
    bool redirect_to_https(Exchange& exchange, SiteHandlers& site);
    // Basic auth for `decoded_path`: true when the request goes on (an open
    // path, verified credentials, or a rule the verifier granted for this
    // exchange), else its answer is set (401, 400, 503, or an AuthStream
    // that waits for the verifier).
    bool authorize(Exchange& exchange, RouteState& route, std::string_view decoded_path);
    void answer_unauthorized(Exchange& exchange, RouteState& route, const AuthRule& rule);
    // The decoded path the limits and access rules match (router_limits.cc).
    std::optional<std::string_view> rule_path(const Request& request);
    // A limit or access rule refuses the request with `status` (router_limits.cc),
    // with a Retry-After unless it is 0.
    void refuse(Exchange& exchange, RouteState& route, int status,
                unsigned retry_after_seconds = 0);
    // One error-log line in nginx's form for a request, which fail2ban's
    // filters read: "*FD WHAT, client: ADDR, server: NAME, request: "...", host: "..."".
    void log_refusal(const Exchange& exchange, const RouteState& route, std::string_view what);
    // A failed basic-auth attempt, as nginx's auth_basic logs it:
    // `user "x": password mismatch` or `user "x" was not found in "FILE"`.
    void log_auth_failure(const Exchange& exchange, const RouteState& route, const AuthRule& rule,
                          std::string_view user, bool unknown_user);
    // What a custom access-log format names beyond the Combined fields.
    AccessLogExtras log_extras(const Exchange& exchange);
    // The user name an Authorization header supplies, verified or not (the access log's).
    std::string_view supplied_user(const Exchange& exchange);
    // The site's HTTP backend, when the request is for it (server/router_proxy.cc).
    bool route_to_proxy(Exchange& exchange, RouteState& state);
    // Sends the request to the backends of `proxy` (the site's or a location's).
    void proxy_to(Exchange& exchange, RouteState& state, const ProxyRoute& proxy);
    // try_files' candidates for the decoded path in path_ (router.cc).
    StepOutcome try_candidates(Exchange& exchange, RouteState& route, const TryFiles& try_files);
    // Whether `decoded_path` is a file or directory of the site, or of the
    // location with a root of its own that takes it (router_locations.cc).
    StaticHandler::Probe probe(RouteState& route, std::string_view decoded_path, uint64_t now_ms);
    // Whether try_files takes `decoded_path` as found for being a script of
    // the site followed by a PATH_INFO ("/remote.php/dav/x"; router.cc).
    bool is_script_with_path_info(RouteState& route, std::string_view decoded_path);
    // Serves `request` (a path under `location`, which has a root) from the
    // location's files or scripts; `rewritten`: try_files' target.
    void serve_location(Exchange& exchange, RouteState& route, const LocationHandlers& location,
                        const Request& request, bool rewritten);
    // Routes `request` (the client's, or one try_files re-routed) to the
    // script or the files; `rewritten`: the script must see its path and query.
    void route_request(Exchange& exchange, RouteState& route, const Request& request,
                       bool rewritten);
    // Sends the request to the site's FastCGI backend as `target` (its
    // SERVER_NAME and parameters the site's), body buffered as the site says.
    void run_script(Exchange& exchange, RouteState& route, fastcgi::ScriptTarget target);
    // The files of a location answered: error pages, and a directory's 301
    // pointed back under the location's path.
    void finish_location_answer(Exchange& exchange, RouteState& route, std::string_view prefix);
    // Re-routes the exchange to `decoded_path`?`query` (method, headers and
    // body kept): Answered, or Pending while the target's password is checked.
    StepOutcome rewrite(Exchange& exchange, RouteState& route, std::string_view decoded_path,
                        std::string_view query, const Request& request);
    // The site's error page for `status`, if any, replaces the error answer in
    // exchange.response (a static page) or becomes a stream (a script).
    void apply_error_page(Exchange& exchange, RouteState& route, int status);
    bool run_error_script(Exchange& exchange, RouteState& route, std::string_view page, int status);
    // The site's (and its location's) header rules for the request's decoded path, added to the
    // complete response or kept for the streamed one's head (for a site that
    // uses header rules: SiteHandlers::uses).
    void add_rule_headers(Exchange& exchange, RouteState& route);
    // Serves the file a handler named (route.redirect_target: server/x_accel.h).
    void serve_x_accel(Exchange& exchange, RouteState& route);
    // A target serve_x_accel will not serve: 502, logged with `why`.
    void refuse_x_accel(Exchange& exchange, RouteState& route, std::string_view target,
                        const char* why);

    Worker& worker_;
    std::vector<Cidr> status_allow_;
    // Route states of finished exchanges, reused: no allocation per request.
    std::vector<std::unique_ptr<RouteState>> spare_routes_;
    std::string path_;                             // scratch: the decoded path
    std::string candidate_;                        // scratch: a try_files candidate, expanded
    std::string rewritten_path_, rewritten_query_; // scratch: try_files's fallback
    std::string log_line_;                         // scratch: the access log line
    Response page_scratch_;                        // scratch: a static error page
    std::string credentials_;                      // scratch: decoded basic credentials
    PatternMatch pattern_match_;                   // scratch: a pattern redirect's captures
    std::string redirect_target_;                  // scratch: where a redirect goes
    std::string location_path_;                    // scratch: a path below a location's root
    BasicAuth auth_;                               // this reactor's verified credentials
    std::string alt_svc_; // h3=":PORT" with a quic:// listener (RFC 7838), else empty
};

} // namespace lepus
