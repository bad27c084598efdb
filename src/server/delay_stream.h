// DelayStream: a request let through within its rate limit's burst, without
// nodelay (nginx's limit_req delay), waits here until the bucket has leaked
// its excess. The wait is a timer on the reactor's wheel, so the reactor
// serves everyone else meanwhile; when it fires the router goes on with the
// steps after the limit (Router::resume_delayed) and the stream forwards to
// what they gave, as AuthStream does after a verdict. The request body stays
// with the client until then (back-pressure).
#pragma once

#include "http/exchange.h"
#include "net/timer_wheel.h"

#include <memory>

namespace lepus {

class Router;

class DelayStream final : public ResponseStream {
public:
    DelayStream(Router& router, Exchange& exchange, TimerWheel& timers, uint64_t deadline_ms);

    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    StreamState poll() override;
    const StreamHead& head() const override { return inner_->head(); }
    std::span<const char> body() const override { return inner_->body(); }
    void consume(size_t bytes) override { inner_->consume(bytes); }
    bool ended() const override { return inner_->ended(); }
    int error_status() const override { return inner_->error_status(); }
    std::span<const Header> error_fields() const override { return inner_->error_fields(); }
    void release() override;

private:
    static void on_timer(TimerEntry& entry);
    // Routes the exchange now that the wait is over, keeping what it gives as inner_.
    void route();

    Router& router_;
    Exchange& exchange_;
    TimerWheel& timers_;
    OwnedTimerEntry<DelayStream> timer_; // unlinks itself if the client leaves first
    bool due_ = false;
    bool body_ended_ = false;
    std::unique_ptr<ResponseStream> inner_;
};

} // namespace lepus
