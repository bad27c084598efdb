// The router's location steps: a [[site]]'s `locations` (config_file.h:
// SiteLocation), nginx's `location /wp-content/ { alias DIR; }`.
//
// step_find_location, early (after the redirects), picks the location for the
// client's path, so that the location's own conn_limit, limits, access and auth
// replace the site's in the steps that follow, and its headers join the
// site's on the answer (Router::add_rule_headers). A site without locations
// never runs it (run_steps), and so pays nothing for them.
//
// step_location, with the content handlers, answers for it: handler = "proxy"
// sends the request, its path unchanged, to the location's own backends;
// with a root the path below the location's prefix is a file of that root,
// opened beneath it with the site's symlink rule (StaticHandler,
// open_beneath), and with handler = "fastcgi" scripts there run with that
// root as DOCUMENT_ROOT; its own try_files are tried there first. A
// location without a root (nor a backend) goes on as the site would, with
// its own try_files if it has some.
//
// Order, as nginx's: an exact location (exact = true) for its one path, then
// the longest prefix; a prefix matches whole segments ("/wp-content" takes
// "/wp-content/x", never "/wp-contentx").
#include "fastcgi/cgi_params.h"
#include "http/path.h"
#include "server/router.h"
#include "server/serving_set.h"

namespace lepus {
namespace {

// "/wp-content/" and "/wp-content" both stand for "/wp-content" in front of
// a path of the root.
std::string_view without_trailing_slash(std::string_view prefix) {
    return prefix.ends_with('/') ? prefix.substr(0, prefix.size() - 1) : prefix;
}

// The decoded path as a path of the location's root: what follows the prefix
// (an exact location: its last segment, the one file it names); "" for "/".
std::string_view below_location(const SiteLocation& config, std::string_view decoded_path) {
    if (config.exact) return decoded_path.substr(decoded_path.rfind('/'));
    return decoded_path.substr(without_trailing_slash(config.path).size());
}

} // namespace

const LocationHandlers* find_location(const SiteHandlers& site, std::string_view path) {
    for (const SiteHandlers::Location& location : site.locations) {
        const std::string& prefix = location.config->path;
        if (location.config->exact ? path == prefix
                                   : path.starts_with(prefix) &&
                                         (prefix.ends_with('/') || path.size() == prefix.size() ||
                                          path[prefix.size()] == '/'))
            return &location;
    }
    return nullptr;
}

Router::StepOutcome Router::step_find_location(Exchange& exchange, RouteState& route) {
    const Request& request = *exchange.request;
    // "OPTIONS *" and undecodable paths: the site's rules and answers (204, 400).
    if (request.path == "*") return StepOutcome::Continue;
    std::optional<std::string_view> path = rule_path(request);
    if (path) route.location = find_location(*route.site, *path);
    return StepOutcome::Continue;
}

Router::StepOutcome Router::step_location(Exchange& exchange, RouteState& route) {
    const LocationHandlers& location = *route.location;
    if (location.proxy) {
        proxy_to(exchange, route, *location.proxy);
        return StepOutcome::Answered;
    }
    if (!location.files) return StepOutcome::Continue; // the site's files, as without it
    if (decode_path(exchange.request->path, path_) != 0) return StepOutcome::Continue;
    if (location.own->try_files) {
        StepOutcome outcome = try_candidates(exchange, route, *location.own->try_files);
        if (outcome != StepOutcome::Continue) return outcome;
    }
    serve_location(exchange, route, location, *exchange.request, false);
    return StepOutcome::Answered;
}

StaticHandler::Probe Router::probe(RouteState& route, std::string_view decoded_path,
                                   uint64_t now_ms) {
    const SiteHandlers& site = *route.site;
    if (site.uses.locations)
        if (const LocationHandlers* location = find_location(site, decoded_path);
            location && location->files) {
            std::string_view below = below_location(*location->config, decoded_path);
            return location->files->probe(below.empty() ? "/" : below, now_ms);
        }
    return site.files->probe(decoded_path, now_ms);
}

void Router::serve_location(Exchange& exchange, RouteState& route, const LocationHandlers& location,
                            const Request& request, bool rewritten) {
    const SiteLocation& config = *location.config;
    // path_ holds the decoded request.path (the callers decoded it).
    std::string_view prefix = without_trailing_slash(config.path);
    std::string_view below = below_location(config, path_);
    location_path_.clear();
    if (!below.starts_with('/')) location_path_.push_back('/');
    append_percent_encoded(below, location_path_);
    Request inner = request;
    inner.path = location_path_;
    if (location.scripts) {
        fastcgi::ScriptResolver& scripts = *location.scripts;
        switch (scripts.route(inner, exchange.now_ms)) {
        case fastcgi::RouteKind::Static:
            break;
        case fastcgi::RouteKind::Error:
            if (request.has_body()) exchange.keep_alive = false;
            build_error_response(scripts.status(), reply_context(exchange), exchange.response);
            return apply_error_page(exchange, route, scripts.status());
        case fastcgi::RouteKind::Script: {
            // SCRIPT_NAME is the client's path (nginx's $fastcgi_script_name
            // with alias); the file is the location root's.
            std::string script_name(prefix);
            script_name.append(scripts.script_name());
            fastcgi::ScriptTarget target{scripts.document_root(),
                                         script_name,
                                         scripts.path_info(),
                                         scripts.script_filename(),
                                         {}};
            if (rewritten) {
                target.rewritten = true;
                target.rewritten_path = request.path;
                target.rewritten_query = request.query;
            }
            return run_script(exchange, route, target);
        }
        }
    } else if (!location.extension_views.empty() &&
               fastcgi::split_script_path(path_, location.extension_views)) {
        // A script of the site under a static location: never its source.
        if (request.has_body()) exchange.keep_alive = false;
        build_error_response(403, reply_context(exchange), exchange.response);
        return apply_error_page(exchange, route, 403);
    }
    location.files->handle(inner, exchange.keep_alive, exchange.now_ms, exchange.response);
    finish_location_answer(exchange, route, prefix);
}

void Router::finish_location_answer(Exchange& exchange, RouteState& route,
                                    std::string_view prefix) {
    Response& response = exchange.response;
    int status = response.head.status;
    if (status >= 400) return apply_error_page(exchange, route, status);
    if (status != 301) return;
    // The files' "directory named without its slash" 301 names the path below
    // the root: put the location's prefix back in front of it.
    std::optional<std::string_view> location = response.head.get("Location");
    if (!location || !location->starts_with('/')) return;
    std::string moved;
    append_percent_encoded(prefix, moved);
    moved.append(*location);
    response.head.set("Location", moved);
}

} // namespace lepus
