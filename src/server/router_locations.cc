// The router's location step: a [[site]]'s `locations` (config_file.h:
// SiteLocation), nginx's `location /wp-content/ { alias DIR; }`. The path
// below the location's prefix is a file of the location's root, opened
// beneath it with the site's symlink rule (StaticHandler, open_beneath); with
// handler = "fastcgi" scripts there run with that root as DOCUMENT_ROOT.
//
// Order, as nginx's: an exact location (exact = true) for its one path, then
// the longest prefix; a prefix matches whole segments ("/wp-content" takes
// "/wp-content/x", never "/wp-contentx"). Basic auth and the header rules
// have already run on the client's path (their prefixes are the site's).
#include "fastcgi/cgi_params.h"
#include "http/path.h"
#include "server/router.h"
#include "server/serving_set.h"

namespace lepus {
namespace {

const SiteHandlers::Location* find_location(const SiteHandlers& site, std::string_view path) {
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

// "/wp-content/" and "/wp-content" both stand for "/wp-content" in front of
// a path of the root.
std::string_view without_trailing_slash(std::string_view prefix) {
    return prefix.ends_with('/') ? prefix.substr(0, prefix.size() - 1) : prefix;
}

} // namespace

Router::StepOutcome Router::step_location(Exchange& exchange, RouteState& route) {
    SiteHandlers& site = *route.site;
    const Request& request = *exchange.request;
    // "OPTIONS *" and undecodable paths: the handlers' own answers (204, 400).
    if (request.path == "*" || decode_path(request.path, path_) != 0) return StepOutcome::Continue;
    const SiteHandlers::Location* location = find_location(site, path_);
    if (!location) return StepOutcome::Continue;
    const SiteLocation& config = *location->config;
    std::string_view prefix = without_trailing_slash(config.path);
    // The path as a request of the location's root: what follows the prefix
    // (an exact location: its last segment, the one file it names).
    std::string_view below = config.exact ? std::string_view(path_).substr(path_.rfind('/'))
                                          : std::string_view(path_).substr(prefix.size());
    location_path_.clear();
    if (!below.starts_with('/')) location_path_.push_back('/');
    append_percent_encoded(below, location_path_);
    Request inner = request;
    inner.path = location_path_;
    if (location->scripts) {
        fastcgi::ScriptResolver& scripts = *location->scripts;
        switch (scripts.route(inner, exchange.now_ms)) {
        case fastcgi::RouteKind::Static:
            break;
        case fastcgi::RouteKind::Error:
            if (request.has_body()) exchange.keep_alive = false;
            build_error_response(scripts.status(), reply_context(exchange), exchange.response);
            apply_error_page(exchange, route, scripts.status());
            return StepOutcome::Answered;
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
            run_script(exchange, route, target);
            return StepOutcome::Answered;
        }
        }
    } else if (!location->extension_views.empty() &&
               fastcgi::split_script_path(path_, location->extension_views)) {
        // A script of the site under a static location: never its source.
        if (request.has_body()) exchange.keep_alive = false;
        build_error_response(403, reply_context(exchange), exchange.response);
        apply_error_page(exchange, route, 403);
        return StepOutcome::Answered;
    }
    location->files->handle(inner, exchange.keep_alive, exchange.now_ms, exchange.response);
    finish_location_answer(exchange, route, prefix);
    return StepOutcome::Answered;
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
