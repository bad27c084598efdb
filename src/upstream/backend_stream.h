// BackendStream: what every exchange answered by a backend shares, whatever
// the protocol (FastCgiExchange, ProxyExchange): the ResponseStream side of
// an upstream::Client. The connection is asked for at the first poll(), not
// when the stream is made, so a stream the client resets at once (HTTP/2's
// HEADERS then RST_STREAM, or a stream the server resets, in one read) never
// opens a backend connection (issue 32). The admission's answer is here too:
// a request the pool refuses is a 503 with Retry-After, at once.
#pragma once

#include "http/exchange.h"
#include "upstream/group.h"
#include "upstream/pool.h"

#include <span>
#include <string>
#include <string_view>

namespace lepus::upstream {

// RFC 9110 §9.2.2: a request that may be sent twice.
bool is_idempotent(Method method);

class BackendStream : public ResponseStream, public Client {
public:
    ~BackendStream() override;

    // The request body goes to the connection in its protocol's framing
    // (Connection::append_body) once the request head is on it, while less
    // than Connection::kSendHighWater waits to be sent (back-pressure).
    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    // send(), then Ready once the connection has the response head (take_head).
    StreamState poll() override;

    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override;
    void consume(size_t bytes) override;
    bool ended() const override;
    int error_status() const override { return error_status_; }
    std::span<const Header> error_fields() const override { return error_fields_; }
    // The connection returns to its pool, or drains the rest of an abandoned response first.
    void release() override;

    void on_upstream_progress() override;

protected:
    // Picks the backend of `group` for the request (see Group::pick).
    BackendStream(Group& group, Exchange& exchange);

    // Until the request is on a connection: the pool asked (at the first
    // call), the request written by write_request() once a connection is
    // there, and sent; a connection that could not be made replaced by the
    // next backend's. Pending while queued; Failed when the pool refused (503,
    // Retry-After), gave nothing (502) or the connection failed (502, 504);
    // Ready once the request is on its way.
    StreamState send();
    // Writes the request (or resend_, after a fail-over) on `connection`.
    virtual void write_request(Connection& connection) = 0;
    // Fills head_ from the connection's response head (once, at the first Ready).
    virtual void take_head(Connection& connection) = 0;
    // The request asks to switch protocols: it needs a tunnel slot.
    virtual bool wants_tunnel() const { return false; }
    // A failed connection's answer: 504 after a timeout, else 502 (Broken after the head).
    StreamState failed(Failure failure);
    StreamState failed(int status, std::span<const Header> fields = {});

    Group& group_;
    Pool* pool_ = nullptr;
    Exchange& exchange_;
    std::string key_; // the hash key (Balance::Hash only)
    // The request bytes a failed connection never sent, for the next backend.
    std::string resend_;
    bool resend_complete_ = false;
    StreamHead head_;
    int error_status_ = 0;
    std::span<const Header> error_fields_;
    bool request_sent_ = false;
    bool head_reported_ = false;
    bool body_ended_ = false; // the client's body is complete

private:
    void acquire();
    StreamState admission();
    // A backend that could not be connected to (refused, unreachable, or the
    // connect timed out: nothing reached it), or that closed the connection
    // of an idempotent request before answering (it died): resend_ takes the
    // request bytes, for the next backend of the group. False for any other
    // failure, or once every backend was tried (bounded in tries, and each in
    // time by the connect and response timeouts).
    bool fail_over();

    size_t attempts_ = 1;
    bool released_ = false;
    bool acquired_ = false;
};

} // namespace lepus::upstream
