// The router's basic-auth step (nginx's auth_basic, in its access phase):
// the rule for the path, the credentials, the verifier's answer (at once, or
// later through AuthStream and resume()), and the failed-login lines that
// fail2ban reads.
#include "base/ascii.h"
#include "http/path.h"
#include "log/error_log.h"
#include "log/log_escape.h"
#include "server/auth_stream.h"
#include "server/router.h"
#include "server/serving_set.h"

namespace lepus {

void Router::resume(Exchange& exchange, bool granted, std::string_view user, const AuthRule& rule,
                    bool unknown_user) {
    ScopedLogContext context(route_log_context(exchange));
    RouteState& route = route_of(exchange);
    if (!granted) {
        site_of(exchange, route);
        log_auth_failure(exchange, route, rule, user, unknown_user);
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

// As nginx's access phase: after the redirects, before any handler.
Router::StepOutcome Router::step_access(Exchange& exchange, RouteState& route) {
    // run_steps calls this step only when the site or one of its locations has rules.
    if (exchange.request->path == "*") return StepOutcome::Continue;
    if (decode_path(exchange.request->path, path_) != 0) {
        build_error_response(400, reply_context(exchange), exchange.response);
        return StepOutcome::Answered;
    }
    if (authorize(exchange, route, path_)) return StepOutcome::Continue;
    return exchange.stream ? StepOutcome::Pending : StepOutcome::Answered;
}

bool Router::authorize(Exchange& exchange, RouteState& route, std::string_view decoded_path) {
    SiteHandlers& site = *route.site;
    // The rules of the location that takes the path (a try_files or X-Accel
    // target may be in another than the client's), if it has any, else the site's.
    const SiteConfig* rules = site.config;
    if (site.uses.locations)
        if (const LocationHandlers* location = find_location(site, decoded_path);
            location && !location->own->auth.empty())
            rules = location->own;
    if (!rules || rules->auth.empty()) return true;
    const AuthRule* rule = find_auth_rule(*rules, decoded_path);
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
    case BasicAuth::Outcome::Denied: // an empty file: no user is in it
        log_auth_failure(exchange, route, *rule, credentials->user, true);
        answer_unauthorized(exchange, route, *rule);
        return false;
    case BasicAuth::Outcome::Busy:
        build_error_response(503, reply_context(exchange), exchange.response);
        exchange.response.head.add("Retry-After", "1");
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
    std::string challenge = R"(Basic realm=")" + rule.realm + R"(", charset="UTF-8")";
    build_error_response(401, reply_context(exchange), exchange.response);
    exchange.response.head.add("WWW-Authenticate", challenge);
    apply_error_page(exchange, route, 401);
}

// The lines fail2ban's stock nginx-http-auth filter matches. The *N of nginx
// is its connection number; ours is the connection's socket.
void Router::log_auth_failure(const Exchange& exchange, const RouteState& route,
                              const AuthRule& rule, std::string_view user, bool unknown_user) {
    std::string what = "user \"";
    append_log_escaped(user, what);
    if (unknown_user) {
        what.append("\" was not found in \"");
        append_log_escaped(rule.htpasswd, what);
        what.push_back('"');
    } else {
        what.append("\": password mismatch");
    }
    log_refusal(exchange, route, what);
}

std::string_view Router::supplied_user(const Exchange& exchange) {
    if (!exchange.remote_user.empty() || !exchange.request) return exchange.remote_user;
    for (const Header& header : exchange.request->headers)
        if (ascii_iequals(header.name, "Authorization"))
            if (auto credentials = parse_basic_credentials(header.value, credentials_))
                return credentials->user;
    return {};
}

} // namespace lepus
