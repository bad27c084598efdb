#include "server/delay_stream.h"

#include "http/complete_stream.h"
#include "server/router.h"

namespace lepus {

DelayStream::DelayStream(Router& router, Exchange& exchange, TimerWheel& timers,
                         uint64_t deadline_ms)
    : router_(router), exchange_(exchange), timers_(timers), timer_(this, &DelayStream::on_timer) {
    timers.schedule(timer_, deadline_ms);
}

void DelayStream::on_timer(TimerEntry& entry) {
    DelayStream& stream = OwnedTimerEntry<DelayStream>::owner_of(entry);
    stream.due_ = true;
    stream.exchange_.listener->on_exchange_progress();
}

size_t DelayStream::offer_body(std::span<const char> data) {
    return inner_ ? inner_->offer_body(data) : 0;
}

void DelayStream::end_body() {
    body_ended_ = true;
    if (inner_) inner_->end_body();
}

StreamState DelayStream::poll() {
    if (!inner_) {
        if (!due_) return StreamState::Pending;
        route();
    }
    return inner_->poll();
}

void DelayStream::route() {
    // As AuthStream::route: the router answers into the exchange, where this
    // stream sits; step aside while it does.
    std::unique_ptr<ResponseStream> current = std::move(exchange_.stream);
    exchange_.stream_fields.clear();
    exchange_.response.reset();
    router_.resume_delayed(exchange_);
    if (exchange_.stream)
        inner_ = std::move(exchange_.stream);
    else
        inner_ = std::make_unique<CompleteStream>(exchange_.response, exchange_.request->is_head());
    exchange_.stream = std::move(current);
    if (body_ended_) inner_->end_body();
}

void DelayStream::release() {
    timers_.cancel(timer_);
    if (inner_) inner_->release();
}

} // namespace lepus
