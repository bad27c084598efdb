// MinRate: a floor on how fast bytes must move while a transfer waits on its
// peer, as Kestrel's MinResponseDataRate and MinRequestBodyDataRate (240
// bytes/s). A deadline that every byte restarts lets a client hold a
// connection (and what it holds: stream memory, a backend connection) for
// ever with one byte now and then (issue 32: a 1-byte WINDOW_UPDATE, or a
// request body byte, every 20 s). Here the time spent waiting is cut into
// intervals; an interval whose end finds fewer than `bytes_per_second` x its
// length moved (and at least one byte) is a timeout. The first interval is
// the grace period. Time in which the transfer does not wait on the peer (the
// other side holds it back: a backend that takes no more body yet) does not
// count, as Kestrel pauses its timing while the application does not read.
//
// The engines use it for output that waits (Http2Engine, --send-timeout
// intervals, 256 bytes/s) and for request bodies that stream to a backend
// (both engines, --body-timeout intervals, --min-body-rate).
#pragma once

#include <algorithm>
#include <cstdint>

namespace lepus {

class MinRate {
public:
    // A new transfer, waiting from now: the first interval starts.
    void start(uint64_t now_ms) {
        *this = MinRate();
        wait(now_ms);
    }
    // The transfer waits on its peer from now (no-op while it already does).
    void wait(uint64_t now_ms) {
        if (waiting_) return;
        waiting_ = true;
        since_ms_ = now_ms;
    }
    // It no longer waits on its peer: the interval's clock stops.
    void pause(uint64_t now_ms) {
        if (!waiting_) return;
        waiting_ = false;
        waited_ms_ += now_ms - since_ms_;
    }
    bool waiting() const { return waiting_; }
    // Bytes moved during the current interval.
    void moved(uint64_t bytes) { moved_ += bytes; }
    // While waiting: when the current interval ends.
    uint64_t deadline(uint64_t interval_ms) const {
        return since_ms_ + (interval_ms > waited_ms_ ? interval_ms - waited_ms_ : 0);
    }
    // At or after deadline(): whether the interval moved enough; if so the
    // next one starts now.
    bool passed(uint64_t now_ms, uint64_t interval_ms, uint64_t bytes_per_second) {
        uint64_t wanted = std::max<uint64_t>(bytes_per_second * interval_ms / 1000, 1);
        if (moved_ < wanted) return false;
        start(now_ms);
        return true;
    }

private:
    uint64_t since_ms_ = 0;  // when the current wait began
    uint64_t waited_ms_ = 0; // waited in the current interval before that
    uint64_t moved_ = 0;
    bool waiting_ = false;
};

} // namespace lepus
