// The context nginx gives an error line about a request, written once for every
// layer that logs one (the router's handlers, FastCGI, the proxy):
//   client: 203.0.113.7, server: example.org, request: "GET /x HTTP/1.1",
//   upstream: "unix:/run/php/php8.2-fpm.sock", host: "example.org"
// so that an admin can find the request in the access log and the backend
// that failed it.
#pragma once

#include "log/error_log.h"

#include <string>
#include <string_view>

namespace lepus {

struct Exchange;

// Appends the context of `exchange` to `out`: the client, `server` (the site's
// first name; may be empty), the request line and Host, each escaped as
// the access log escapes, and `upstream` when not empty. The request's views
// must be valid (the engine's exchange, before finish()).
void append_exchange_context(const Exchange& exchange, std::string_view server,
                             std::string_view upstream, std::string& out);

} // namespace lepus
