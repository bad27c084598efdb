#include "server/delay_stream.h"

#include "server/router.h"

namespace lepus {

DelayStream::DelayStream(Router& router, Exchange& exchange, TimerWheel& timers,
                         uint64_t deadline_ms)
    : WaitingStream(exchange), router_(router), timers_(timers),
      timer_(this, &DelayStream::on_timer) {
    timers.schedule(timer_, deadline_ms);
}

void DelayStream::on_timer(TimerEntry& entry) {
    DelayStream& stream = OwnedTimerEntry<DelayStream>::owner_of(entry);
    stream.due_ = true;
    stream.exchange_.listener->on_exchange_progress();
}

void DelayStream::resume_router() {
    router_.resume_delayed(exchange_);
}

void DelayStream::cancel_wait() {
    timers_.cancel(timer_);
}

} // namespace lepus
