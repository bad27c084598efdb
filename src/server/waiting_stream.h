// WaitingStream: what the router answers while a step waits (a password
// check on the verifier thread: AuthStream; a rate limit's delay on the
// wheel: DelayStream). It stays Pending, taking none of the request body
// (back-pressure: a refused request must not have fed it to anything), until
// the wait is over; then the router runs the remaining steps on the exchange
// (resume_router) and the stream forwards to what they gave: the inner
// stream (PHP, the proxy), or the complete response (a static file, a
// redirect, an error page) as a CompleteStream. No engine knows the
// difference, HTTP/1.1 or HTTP/2.
#pragma once

#include "http/forwarding_stream.h"

namespace lepus {

class WaitingStream : public ForwardingStream {
public:
    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    StreamState poll() override;
    void release() override;

protected:
    explicit WaitingStream(Exchange& exchange) : exchange_(exchange) {}

    // Whether the wait is over (poll() then routes).
    virtual bool wait_over() const = 0;
    // Runs the router's remaining steps on the exchange.
    virtual void resume_router() = 0;
    // The client left or the exchange ended before the wait was over.
    virtual void cancel_wait() = 0;

    Exchange& exchange_;

private:
    // Routes the exchange now that the wait is over, keeping what it gives as
    // inner_ (ForwardingStream's).
    void route();

    bool body_ended_ = false;
};

} // namespace lepus
