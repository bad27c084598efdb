// ProxyExchange: one request answered by an HTTP backend, as a ResponseStream
// that a protocol engine drives (the second one, beside FastCgiExchange).
//
//   constructed -> a backend of the group is chosen (round robin, skipping
//                  the ones that refused a connection lately); its pool gives
//                  a connection, queues the request, or refuses it (poll:
//                  Failed, 503 with Retry-After); an upgrade first takes a
//                  tunnel slot (--proxy-tunnels), else the same 503
//   poll        -> the request head (hop-by-hop fields dropped, Host,
//                  X-Forwarded-*, Forwarded set) and the body bytes as they
//                  come, re-chunked when the client sent them chunked, at
//                  most BackendConnection::kSendHighWater buffered
//              -> a connection that could not be made: the next backend, with
//                  the same bytes (nothing reached the first one)
//              -> Ready once the backend's head is parsed; body bytes as they
//                  come, at most kBodyHighWater buffered
//   release     -> the connection returns to its pool or drains first.
//
// Failures before the head: 502 (504 on a timeout); after it, Broken.
#pragma once

#include "http/exchange.h"
#include "proxy/upstream.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::proxy {

// The backends of one site on one reactor: a pool per backend, taken in turn.
struct BackendGroup {
    std::vector<std::shared_ptr<BackendPool>> pools;
    size_t next = 0;

    // The next backend in turn that did not refuse a connection lately (any,
    // when all did: one of them may be back); `skip` is not chosen when
    // another is available.
    BackendPool& pick(uint64_t now_ms, const BackendPool* skip = nullptr);
};

// What the router resolved for the request.
struct ProxyTarget {
    std::string_view host;        // `host = "..."` of the site; empty: the client's Host
    std::string_view server = {}; // the site's name, for the error log's context
};

class ProxyExchange final : public ResponseStream, public BackendClient {
public:
    ProxyExchange(BackendGroup& group, Exchange& exchange, const ProxyTarget& target);
    ~ProxyExchange() override;

    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    StreamState poll() override;
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override;
    void consume(size_t bytes) override;
    bool ended() const override;
    int error_status() const override { return error_status_; }
    std::span<const Header> error_fields() const override { return error_fields_; }
    void release() override;

    void on_backend_progress() override;

private:
    void send_request(BackendConnection& backend);
    // A backend that could not be connected to: the same request to another.
    bool fail_over();
    // The request asks to switch protocols: it needs one of the backend's tunnel slots.
    bool wants_tunnel() const;
    StreamState failed(int status, std::span<const Header> fields = {});

    BackendGroup& group_;
    BackendPool* pool_;
    Exchange& exchange_;
    std::string host_;
    std::string server_; // ProxyTarget::server
    // The request bytes a failed connection never sent, for the next backend.
    std::string resend_;
    std::vector<Header> headers_; // the backend's, without its hop-by-hop fields
    StreamHead head_;
    size_t attempts_ = 1;
    int error_status_ = 0;
    std::span<const Header> error_fields_;
    bool chunked_ = false; // the body goes chunked (the client's was)
    bool resend_complete_ = false;
    bool request_sent_ = false;
    bool body_ended_ = false;
    bool head_reported_ = false;
    bool released_ = false;
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
