// DelayStream: a request let through within its rate limit's burst, without
// nodelay (nginx's limit_req delay), waits here until the bucket has leaked
// its excess. The wait is a timer on the reactor's wheel, so the reactor
// serves everyone else meanwhile; when it fires the router goes on with the
// steps after the limit (Router::resume_delayed) and the stream forwards to
// what they gave (WaitingStream).
#pragma once

#include "net/timer_wheel.h"
#include "server/waiting_stream.h"

namespace lepus {

class Router;

class DelayStream final : public WaitingStream {
public:
    DelayStream(Router& router, Exchange& exchange, TimerWheel& timers, uint64_t deadline_ms);

private:
    static void on_timer(TimerEntry& entry);
    bool wait_over() const override { return due_; }
    void resume_router() override;
    void cancel_wait() override;

    Router& router_;
    TimerWheel& timers_;
    OwnedTimerEntry<DelayStream> timer_; // unlinks itself if the client leaves first
    bool due_ = false;
};

} // namespace lepus
