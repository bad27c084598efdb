// The response filters around a handler's stream: whatever produced a streamed
// response (a PHP script, an error page's script, an HTTP backend; a cache or
// HTTP/3 later) goes through the same ones, as h2o's output filters
// (lib/handler/compress.c, reproxy.c) and nginx's body filter chain do, so a
// new handler gets them without wiring of its own:
//   - X-Accel-Redirect / X-Sendfile (server/x_accel.h): the file is served
//     instead of the backend's body;
//   - compression in the coding the client accepts (http/compress_stream.h),
//     when the site compresses.
// Before them, nearest the backend: a request body is taken whole first
// (http/buffered_body_stream.h) when the site buffers bodies, so that a slow
// client never holds a backend connection (issue 32).
// The router applies the other response rules to every answer, streamed or
// not, on its own: the site's header rules (Router::add_rule_headers), error
// pages (Router::fail) and the access log line (Router::account).
#pragma once

#include "http/exchange.h"

namespace lepus {

struct SiteHandlers;

// What produced the stream: the filters differ by one rule each (see
// wrap_response_stream).
enum class StreamOrigin : uint8_t { Script, ErrorScript, Proxy };

// Wraps exchange.stream (set by the handler) in the site's response filters.
void wrap_response_stream(Exchange& exchange, const SiteHandlers& site, StreamOrigin origin);

// Whether the backend stream for `exchange` is made only once the request
// body is whole (a BufferedBodyStream with site.body_buffer): a request with a
// body, on a site that buffers, that does not ask to switch protocols.
bool buffers_request_body(const Exchange& exchange, const SiteHandlers& site);

} // namespace lepus
