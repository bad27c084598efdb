// Per-site error pages (`error_page.404 = "/404.html"` in a [[site]]), as
// nginx's `error_page 404 /404.html;`: when lepus itself answers a request of
// the site with a configured 4xx/5xx status — a static 403/404/405/413/416...,
// a script that is missing, a FastCGI 502/503/504 — the body is the page, a
// file under the site's root, and the status stays the original one.
//
// Not for answers produced by a PHP script (nginx's fastcgi_intercept_errors
// is off by default), nor for the status page, nor for the parser's errors
// (400, 414, 431, 501, 505), which happen before the Host, and so the site,
// is known: those get the built-in page.
#pragma once

#include "http/request.h"
#include "http/response.h"
#include "http/static_handler.h"

#include <cstdint>
#include <ctime>
#include <string_view>

namespace lepus {

// Replaces the body of the error response `response` (status, head and body
// already built) with the file `page` served by `files`: same status, the
// extra headers of the original (Allow, Content-Range, Retry-After ...), the
// page's Content-Type (and Content-Encoding with Vary for a .gz sibling), no
// validators. HEAD gets the head only. When the page cannot be served
// (missing, unreadable, a directory) `response` is left as it was and the
// result is false: an error page never leads to another error. `scratch` is
// working space (kept by the caller so that its capacity is reused).
bool apply_error_page(StaticHandler& files, const Request& request, std::string_view page,
                      uint64_t now_ms, Response& response, Response& scratch);

} // namespace lepus
