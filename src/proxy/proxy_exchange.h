// ProxyExchange: one request answered by an HTTP backend, as a ResponseStream
// that a protocol engine drives (the second one, beside FastCgiExchange).
//
//   constructed -> a backend of the group is chosen (upstream/group.h:
//                  balanced, skipping the ones that refused a connection lately)
//   first poll  -> its pool gives a connection, queues the request, or
//                  refuses it (Failed, 503 with Retry-After); an upgrade
//                  first takes a tunnel slot (--proxy-tunnels), else the same 503
//              -> the request head (hop-by-hop fields dropped, Host,
//                  X-Forwarded-*, Forwarded set) and the body bytes as they
//                  come, re-chunked when the client sent them chunked, at
//                  most BackendConnection::kSendHighWater buffered
//              -> a connection that could not be made (refused, or the
//                  connect timed out): the next backend, with
//                  the same bytes (nothing reached the first one)
//              -> Ready once the backend's head is parsed; body bytes as they
//                  come, at most kBodyHighWater buffered
//   release     -> the connection returns to its pool or drains first.
//
// Failures before the head: 502 (504 on a timeout); after it, Broken.
#pragma once

#include "proxy/upstream.h"
#include "upstream/backend_stream.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::proxy {

// The backends of one site on one reactor, and how a request picks one.
using BackendGroup = upstream::Group;

// What the router resolved for the request.
struct ProxyTarget {
    std::string_view host;        // `host = "..."` of the site; empty: the client's Host
    std::string_view server = {}; // the site's name, for the error log's context
};

class ProxyExchange final : public upstream::BackendStream {
public:
    ProxyExchange(BackendGroup& group, Exchange& exchange, const ProxyTarget& target);

    // Once the backend left a tunnel, the client's bytes are dropped.
    size_t offer_body(std::span<const char> data) override;

private:
    void write_request(upstream::Connection& connection) override;
    void take_head(upstream::Connection& connection) override;
    bool wants_tunnel() const override;

    std::string host_;
    std::string server_;          // ProxyTarget::server
    std::vector<Header> headers_; // the backend's, without its hop-by-hop fields
    bool chunked_ = false;        // the body goes chunked (the client's was)
};

// The Upgrade field's value when `request` asks to switch protocols (HTTP/1.1,
// Upgrade named in Connection: RFC 9110 §7.8), else empty (and for h2c).
std::string_view requested_upgrade(const Request& request);

// Appends the request head lepus sends to the backend for `request` (exposed
// for the unit tests); `client` is the exchange's (Exchange::client). The
// client's fields whose names hold '_' are not sent.
void append_request_head(const Request& request, const ConnectionInfo& connection,
                         const SocketAddress& client, std::string_view host, std::string& out);

} // namespace lepus::proxy
