#include "server/response_filters.h"

#include "base/ascii.h"
#include "http/compress_stream.h"
#include "server/serving_set.h"
#include "server/x_accel.h"

namespace lepus {
namespace {

// Whether the stream's head is checked for X-Accel-Redirect / X-Sendfile.
bool watches_x_accel(const SiteHandlers& site, StreamOrigin origin) {
    switch (origin) {
    case StreamOrigin::Script:
        // A script may always name a public file of the site (README: with or
        // without --x-accel).
        return true;
    case StreamOrigin::Proxy:
        // A backend's X-Accel-Redirect is obeyed once the site has an internal
        // folder: a site that never set one up keeps passing the field on, as
        // before (the application may be another server's, unaware of lepus).
        return site.x_accel.has_value();
    case StreamOrigin::ErrorScript:
        // Router::fail would serve the named file as a 200, losing the error
        // status the page stands for (nginx keeps it): the page stays the answer.
        return false;
    }
    return false;
}

} // namespace

void wrap_response_stream(Exchange& exchange, const SiteHandlers& site, StreamOrigin origin) {
    // The innermost filter sees the handler's own head: X-Accel first, so that
    // a redirect is taken before anything is compressed.
    if (watches_x_accel(site, origin))
        exchange.stream = std::make_unique<XAccelStream>(std::move(exchange.stream), exchange,
                                                         site.x_accel ? &*site.x_accel : nullptr);
    // Compressed as it streams (gzip, br or zstd as accepted), with the rules
    // of http/compress_stream.h whatever the handler.
    if (site.compress)
        exchange.stream = std::make_unique<CompressingStream>(std::move(exchange.stream),
                                                              stream_coding(*exchange.request));
}

bool buffers_request_body(const Exchange& exchange, const SiteHandlers& site) {
    const Request& request = *exchange.request;
    if (!site.body_buffer || !request.has_body()) return false;
    // An upgrade's bytes after the head are the tunnel's, with no end to wait
    // for (RFC 9110 §7.8): they stream.
    for (const Header& header : request.headers)
        if (ascii_iequals(header.name, "Upgrade")) return false;
    return true;
}

} // namespace lepus
