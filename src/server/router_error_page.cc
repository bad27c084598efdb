// The router's error pages (nginx's error_page): an error answer is replaced
// once by the site's page for its status, a static file served with the
// original status, or a script run as a GET of the page. Apart from router.cc
// because it is a response rule of every answer, not a routing step.
#include "fastcgi/fastcgi_exchange.h"
#include "server/error_page.h"
#include "server/response_filters.h"
#include "server/router.h"
#include "server/serving_set.h"

namespace lepus {

void Router::apply_error_page(Exchange& exchange, RouteState& route, int status) {
    SiteHandlers& site = *route.site;
    if (!site.config || status < 400) return;
    const std::map<int, std::string>& pages = site.config->error_pages;
    auto page = pages.find(status);
    // One internal redirect at most: an error page that fails gets the built-in one.
    if (page == pages.end() || exchange.internal_redirects > 0) return;
    ++exchange.internal_redirects;
    if (run_error_script(exchange, route, page->second, status)) return;
    // A page that cannot be served leaves the built-in one (logged by the handler if it is a 500).
    lepus::apply_error_page(*site.files, *exchange.request, page->second, exchange.now_ms,
                            exchange.response, page_scratch_);
}

// An error page that names a script runs it through php-fpm (nginx's
// internal redirect), as a GET of the page, answered with the original status.
bool Router::run_error_script(Exchange& exchange, RouteState& route, std::string_view page,
                              int status) {
    SiteHandlers& site = *route.site;
    fastcgi::ScriptResolver* scripts = site.scripts.get();
    if (!scripts) return false;
    Request fetch;
    fetch.method = Method::Get;
    fetch.path = page;
    fetch.target = page;
    if (scripts->route(fetch) != fastcgi::RouteKind::Script) return false;
    std::string server_name;
    if (!site.config->server_names.empty()) server_name = site.config->server_names.front();
    fastcgi::ScriptTarget target{scripts->document_root(),
                                 scripts->script_name(),
                                 scripts->path_info(),
                                 scripts->script_filename(),
                                 server_name,
                                 /*internal_redirect=*/true};
    target.extra_params = site.fastcgi_params;
    exchange.response.reset();
    exchange.stream_status = status;
    exchange.stream = std::make_unique<fastcgi::FastCgiExchange>(route.serving->fastcgi_of(site),
                                                                 exchange, target);
    wrap_response_stream(exchange, site, StreamOrigin::ErrorScript);
    return true;
}

} // namespace lepus
