// BackendStream: what every exchange answered by a backend shares, whatever
// the protocol (FastCgiExchange, ProxyExchange): the ResponseStream side of
// an upstream::Client. The connection is asked for at the first poll(), not
// when the stream is made, so a stream the client resets at once (HTTP/2's
// HEADERS then RST_STREAM, or a stream the server resets, in one read) never
// opens a backend connection (issue 32). The admission's answer is here too:
// a request the pool refuses is a 503 with Retry-After, at once.
#pragma once

#include "http/exchange.h"
#include "upstream/pool.h"

#include <span>
#include <string_view>

namespace lepus::upstream {

class BackendStream : public ResponseStream, public Client {
public:
    ~BackendStream() override;

    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override;
    void consume(size_t bytes) override;
    bool ended() const override;
    int error_status() const override { return error_status_; }
    std::string_view error_headers() const override { return error_headers_; }
    // The connection returns to its pool, or drains the rest of an abandoned response first.
    void release() override;

    void on_upstream_progress() override;

protected:
    BackendStream(Pool& pool, Exchange& exchange) : pool_(&pool), exchange_(exchange) {}

    // Asks the pool for a connection the first time (again after move_to()).
    void acquire(bool upgrade = false);
    // Before the request can be sent: Pending while queued, Failed when the pool
    // refused (503, Retry-After) or gave nothing (502), Ready with a connection.
    StreamState admission();
    // A failed connection's answer: 504 after a timeout, else 502 (Broken after the head).
    StreamState failed(Failure failure);
    StreamState failed(int status, std::string_view headers = {});
    // Gives the connection (or the place in the queue) back and asks `pool` next.
    void move_to(Pool& pool);

    Pool* pool_;
    Exchange& exchange_;
    StreamHead head_;
    int error_status_ = 0;
    std::string_view error_headers_;
    bool head_reported_ = false;
    bool released_ = false;
    bool acquired_ = false;
};

} // namespace lepus::upstream
