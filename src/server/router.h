// Router: the layer above the protocol engines. For each exchange it picks the
// site (by Host), then, in this order, the status page, the site's redirects,
// and the handler: a FastCGI script (a ResponseStream) or the static files (a
// complete Response). Site rules are applied here, once, up front, whatever
// the handler and the protocol:
//   - header rules, matched on the decoded, normalised path, on every response
//     of the site (static, scripts, redirects, errors);
//   - error pages, as an internal redirect through the router (nginx's
//     error_page): a page that names a script runs it, with the original status;
//   - basic auth (server/basic_auth.h), after the redirects and before the
//     handler, on the client's path and on a path try_files re-routes to;
//   - the response filters (server/response_filters.h: X-Accel-Redirect,
//     compression) around every stream a handler returns.
// It writes the access log line when an exchange ends.
//
// To add a response header rule kind: site_table.cc (append_rule_headers).
// To add a handler: route_to_handler() below; pass its stream to
// wrap_response_stream().
#pragma once

#include "http/exchange.h"
#include "net/cidr.h"
#include "server/basic_auth.h"
#include "server/options.h"

#include <string>
#include <vector>

namespace lepus {

class Worker;
struct SiteHandlers;

class Router final : public ExchangeHandler {
public:
    // `options` must be the worker's (already checked: --status-allow parses).
    Router(Worker& worker, const ServerOptions& options);

    void start(Exchange& exchange) override;
    void fail(Exchange& exchange, int status, std::string_view extra_headers) override;
    void account(Exchange& exchange, int status, uint64_t body_bytes) override;
    void finish(Exchange& exchange) override;

    // An AuthStream's verdict is in: routes the exchange as start() would
    // have (as `user`), or answers 401 for `rule`.
    void continue_after_auth(Exchange& exchange, bool granted, std::string_view user,
                             const AuthRule& rule);

private:
    // Chooses the site for the exchange's Host and keeps it (and its serving set) alive.
    SiteHandlers& pick_site(Exchange& exchange);
    bool serve_redirect(Exchange& exchange, SiteHandlers& site);
    bool redirect_to_https(Exchange& exchange, SiteHandlers& site);
    void route_to_handler(Exchange& exchange, SiteHandlers& site);
    // Basic auth for `decoded_path`: true when the request goes on (an open
    // path, or verified credentials), else its answer is set (401, 400, 503,
    // or an AuthStream that waits for the verifier).
    bool authorize(Exchange& exchange, SiteHandlers& site, std::string_view decoded_path);
    void answer_unauthorized(Exchange& exchange, SiteHandlers& site, const AuthRule& rule);
    // The user name an Authorization header supplies, verified or not (the access log's).
    std::string_view supplied_user(const Exchange& exchange);
    // The site's HTTP backend, when the request is for it (server/router_proxy.cc).
    bool route_to_proxy(Exchange& exchange, SiteHandlers& site);
    // The site's try_files: serves the first candidate that exists, else the
    // fallback (an internal re-route, or a status). False when try_files does
    // not apply (none, or a path the handlers refuse themselves).
    bool try_files(Exchange& exchange, SiteHandlers& site);
    // Routes `request` (the client's, or one try_files re-routed) to the
    // script or the files; `rewritten`: the script must see its path and query.
    void route_request(Exchange& exchange, SiteHandlers& site, const Request& request,
                       bool rewritten);
    // Re-routes the exchange to `decoded_path`?`query` (method, headers and body kept).
    void rewrite(Exchange& exchange, SiteHandlers& site, std::string_view decoded_path,
                 std::string_view query, const Request& request);
    // The site's error page for `status`, if any, replaces the error answer in
    // exchange.response (a static page) or becomes a stream (a script).
    void apply_error_page(Exchange& exchange, SiteHandlers& site, int status);
    bool run_error_script(Exchange& exchange, SiteHandlers& site, std::string_view page,
                          int status);
    // The site's header rules for the request's decoded path, added to the
    // complete response or kept for the streamed one's head.
    void add_rule_headers(Exchange& exchange, SiteHandlers& site);
    // Serves the file a script named (exchange.internal_redirect: server/x_accel.h).
    void serve_x_accel(Exchange& exchange, SiteHandlers& site);
    // A 502 for a target serve_x_accel will not serve, with one error-log line.
    void refuse_x_accel(Exchange& exchange, SiteHandlers& site, std::string_view target,
                        const char* why);

    Worker& worker_;
    std::vector<Cidr> status_allow_;
    std::string path_;                             // scratch: the decoded path
    std::string candidate_;                        // scratch: a try_files candidate, expanded
    std::string rewritten_path_, rewritten_query_; // scratch: try_files's fallback
    std::string rule_lines_;                       // scratch: header rule lines
    std::string log_line_;                         // scratch: the access log line
    Response page_scratch_;                        // scratch: a static error page
    std::string credentials_;                      // scratch: decoded basic credentials
    BasicAuth auth_;                               // this reactor's verified credentials
};

} // namespace lepus
