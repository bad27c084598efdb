// HTTP/1.1 to a backend, on upstream::Pool (upstream/pool.h): the request
// head and body go out as HTTP/1.1 (the body re-chunked when the client sent
// it chunked), and the response is parsed as HTTP/1.1 (proxy/response_head.h),
// its body de-framed (Content-Length, chunked through http/chunked_decoder.h,
// or until close) into body(), which the client consumes with back-pressure.
// A 101 that answers an upgrade makes the connection a tunnel, out of the pool.
#pragma once

#include "http/chunked_decoder.h"
#include "proxy/response_head.h"
#include "upstream/pool.h"

#include <cstdint>
#include <span>
#include <string_view>

namespace lepus::proxy {

using upstream::BackendAddress;
using upstream::UpstreamGauges;
// The pool's settings: tunnels is this reactor's share of --proxy-tunnels,
// head_max --proxy-head-max.
using BackendOptions = upstream::PoolOptions;
using BackendFailure = upstream::Failure;
using BackendClient = upstream::Client;

class BackendConnection final : public upstream::Connection {
public:
    BackendConnection(upstream::Pool& pool, Reactor& reactor);

    // --- the request ---
    // Starts the request with its head (copied). `head_request`: the response
    // has no body; `replayable`: an idempotent request that may be sent again
    // on a new connection when a pooled one turns out dead (RFC 9110 §9.2.2);
    // `upgrade`: the request asks to switch protocols, so a 101 makes the
    // connection a tunnel (any other 101 is the backend's error); `chunked`:
    // the body goes in chunks (the client's came chunked).
    void begin_request(std::string_view head, bool head_request, bool replayable,
                       bool upgrade = false, bool chunked = false);
    // Appends body bytes (copied), in chunks when the request is chunked.
    void append_body(std::span<const char> data) override;
    // The body is complete (the last chunk when the request is chunked).
    void end_body() override;
    // A 101 answered the upgrade: body() carries the backend's raw bytes and
    // append_body(data) the client's, until ended() (a close).
    bool tunnel() const { return framing_ == BodyFraming::Tunnel; }

    // --- the response ---
    const ResponseHead& head() const { return head_; }

private:
    void reset_response() override;
    void process_input() override;
    bool ends_at_close() const override {
        return framing_ == BodyFraming::Close || framing_ == BodyFraming::Tunnel;
    }
    bool drainable() const override {
        return framing_ != BodyFraming::Close && wsent_ == wbuf_.size();
    }
    void write_probe(std::string_view path, std::string_view root) override;
    int response_status() const override { return head_.status(); }
    bool take_body(std::span<const char> data, size_t& used);

    ResponseHead head_;
    BodyFraming framing_ = BodyFraming::None;
    uint64_t left_ = 0; // Length: body bytes still to come
    ChunkedDecoder chunks_;
    bool head_request_ = false;
    bool upgrade_ = false; // the request asked to switch protocols
    bool chunked_ = false; // the request body goes in chunks
};

// The per-reactor pool of connections to one HTTP backend.
class BackendPool final : public upstream::Pool {
public:
    BackendPool(Reactor& reactor, BackendOptions options, UpstreamGauges* gauges = nullptr);

private:
    std::unique_ptr<upstream::Connection> make_connection() override;
};

} // namespace lepus::proxy
