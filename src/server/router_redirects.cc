// The router's redirect step: https_redirect, then the site's `redirects`
// (exact, prefix and pattern redirects, and internal rewrites: config_file.h,
// Redirect), as nginx's server-level `return` and `rewrite` run before its
// access phase.
#include "base/ascii.h"
#include "http/path.h"
#include "server/router.h"
#include "server/serving_set.h"
#include "server/site_table.h"

#include <algorithm>

namespace lepus {

Router::StepOutcome Router::step_redirects(Exchange& exchange, RouteState& route) {
    SiteHandlers& site = *route.site;
    if (redirect_to_https(exchange, site)) return StepOutcome::Answered;
    if (!site.config || site.config->redirects.empty()) return StepOutcome::Continue;
    const Request& request = *exchange.request;
    // "OPTIONS *" and undecodable paths: the handlers' own answers (204, 400).
    if (request.path == "*" || decode_path(request.path, path_) != 0) return StepOutcome::Continue;
    const Redirect* redirect = find_redirect(*site.config, path_, pattern_match_);
    if (!redirect) return StepOutcome::Continue;
    redirect_target_.clear();
    append_redirect_target(*redirect, path_, request.query, pattern_match_, redirect_target_);
    if (redirect->rewrite) {
        // nginx's `rewrite ... last`: the same request, served as the target.
        std::string_view target = redirect_target_, query;
        if (size_t mark = target.find('?'); mark != std::string_view::npos) {
            query = target.substr(mark + 1);
            target = target.substr(0, mark);
        }
        if (decode_path(target, candidate_) != 0) {
            // A capture put an unusable path together ("/../" above the root).
            build_error_response(400, reply_context(exchange), exchange.response);
            return StepOutcome::Answered;
        }
        return rewrite(exchange, route, candidate_, query, request);
    }
    build_error_response(redirect->status, reply_context(exchange), exchange.response);
    exchange.response.head.add("Location", redirect_target_);
    return StepOutcome::Answered;
}

// The site's `https_redirect`, as nginx's `return 301 https://$host$request_uri`
// on the port-80 server: the same host (its port dropped) and target over TLS.
bool Router::redirect_to_https(Exchange& exchange, SiteHandlers& site) {
    uint16_t port = site.config ? site.config->https_redirect : site.https_redirect;
    if (port == 0 || exchange.connection->secure) return false;
    const Request& request = *exchange.request;
    std::string_view host = request.host;
    if (host.empty()) return false; // HTTP/1.0 without Host: nothing to name
    // The parser checked the authority's characters; strip its port ("[v6]:80" too).
    size_t colon = host.rfind(':');
    if (colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos)
        host = host.substr(0, colon);
    // The default root redirects --domain's names only: another name (an IP
    // address) has no certificate to be sent to.
    if (!site.config &&
        std::none_of(site.https_redirect_names.begin(), site.https_redirect_names.end(),
                     [&](const std::string& name) { return ascii_iequals(name, host); }))
        return false;
    std::string location = "https://";
    location.append(host);
    if (port != 443) {
        location.push_back(':');
        location.append(std::to_string(port));
    }
    // The absolute form's path and query, or the origin form as sent.
    std::string_view target = request.target;
    if (!target.starts_with('/')) {
        size_t path = target.find('/', target.find("//") + 2);
        target = path == std::string_view::npos ? "/" : target.substr(path);
    }
    location.append(target);
    build_error_response(301, reply_context(exchange), exchange.response);
    exchange.response.head.add("Location", location);
    return true;
}

} // namespace lepus
