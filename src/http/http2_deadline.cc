// Http2Engine's clocks: which deadline the connection waits for next (the
// header and keep-alive timeouts while idle, the send timeout as a minimum
// send rate while output is stalled, the body timeout of streams waiting for
// their client's body), and what happens when it passes. Apart from
// http2_engine.cc (reading, writing, streams and responses) so that the
// timeout policy reads in one place and both files stay a readable size
// (issue 31).
#include "http/detail/http2_stream.h"
#include "http/http2_engine.h"
#include "log/error_log.h"

#include <algorithm>

namespace lepus {

void Http2Engine::plan_deadline() {
    const Http1Options& options = context_.options;
    // Output that cannot leave: the socket is full, or a response waits for
    // the client's flow-control window (a peer that never opens it is closed
    // at the send timeout, as one that never reads).
    bool stalled =
        write_blocked_ || std::any_of(streams_.begin(), streams_.end(),
                                      [](const auto& stream) { return has_data(*stream); });
    // The first interval starts when output began to wait; on_deadline()
    // starts the next ones while the client keeps up the minimum rate.
    if (stalled && !stalled_) {
        if (!send_rate_) send_rate_ = std::make_unique<MinRate>();
        send_rate_->start(context_.clock.now_ms);
    }
    stalled_ = stalled;
    if (stalled)
        deadline_ = send_rate_->deadline(options.send_timeout_ms);
    else if (streams_.empty())
        // The preface and first request under the header deadline, then the
        // keep-alive timeout.
        deadline_ = last_activity_ms_ +
                    (requests_ == 0 ? options.header_timeout_ms : options.keepalive_timeout_ms);
    else
        deadline_ = 0; // streams wait on their backends, which have their own timeouts
    // A stream waiting for its client's body: the body timeout, as HTTP/1.1
    // has it (with request buffering no backend timeout would end the wait).
    if (uint64_t body = body_deadline(); body != 0 && (deadline_ == 0 || body < deadline_))
        deadline_ = body;
}

// Whether `stream` waits for request body bytes its response stream would
// take (one reset for its body, accounted then, waits no more).
static bool waits_for_body(const Http2Stream& stream) {
    return stream.started && !stream.closed && stream.exchange.stream && !stream.request_ended &&
           !stream.body_ended && !stream.submitted && !stream.accounted &&
           stream.body_pending.empty();
}

// When `stream`, waiting for its body, meets its body timeout: silence for
// the timeout, or for a body that holds a backend connection (--request-
// buffering off) the end of a body rate interval.
static uint64_t body_due(const Http2Stream& stream, const Http1Options& options) {
    if (stream.body_rate.waiting()) return stream.body_rate.deadline(options.body_timeout_ms);
    return stream.body_active_ms + options.body_timeout_ms;
}

uint64_t Http2Engine::body_deadline() {
    const Http1Options& options = context_.options;
    uint64_t earliest = 0;
    for (auto& stream : streams_) {
        bool waiting = waits_for_body(*stream);
        bool rate_bound =
            waiting && stream->exchange.body_holds_backend && options.min_body_rate > 0;
        // The rate's clock runs while the body is waited for, not while the
        // backend holds it back; reset_idle_bodies() starts the next interval.
        if (rate_bound)
            stream->body_rate.wait(context_.clock.now_ms);
        else
            stream->body_rate.pause(context_.clock.now_ms);
        if (!waiting) continue;
        uint64_t at = body_due(*stream, options);
        if (earliest == 0 || at < earliest) earliest = at;
    }
    return earliest;
}

bool Http2Engine::reset_idle_bodies() {
    const Http1Options& options = context_.options;
    uint64_t now = context_.clock.now_ms;
    bool any = false;
    for (auto& stream : streams_) {
        int32_t id = stream->id;
        if (!waits_for_body(*stream) || body_due(*stream, options) > now) continue;
        if (stream->body_rate.waiting()) {
            // A trickle (a byte every 20 s) would hold the backend connection
            // for as long as the client liked (issue 32).
            if (stream->body_rate.passed(now, options.body_timeout_ms, options.min_body_rate))
                continue;
            log_info("client %s: stream %d sent its body slower than %llu bytes/s over the body "
                     "timeout, resetting it",
                     info_.peer.to_string().c_str(), int(id),
                     static_cast<unsigned long long>(options.min_body_rate));
        } else {
            log_info("client %s: stream %d sent no body bytes within the body timeout, "
                     "resetting it",
                     info_.peer.to_string().c_str(), int(id));
        }
        // nginx's client_body_timeout: 408 in the log; the stream is cancelled.
        if (!stream->accounted) context_.handler.account(stream->exchange, 408, 0);
        stream->accounted = true;
        reset_stream(uint32_t(id), Http2Error::Cancel);
        any = true;
    }
    return any;
}

Http2Engine::Next Http2Engine::on_deadline() {
    // Fresh: a stream's body may have come (or ended) since the last plan.
    if (!lingering_ && !closed_) plan_deadline();
    uint64_t now = context_.clock.now_ms;
    if (deadline_ == 0 || now < deadline_) return Next::Wait;
    if (lingering_) return Next::Close;
    if (uint64_t body = body_deadline(); body != 0 && body <= now) {
        // Streams whose client stopped sending its body (--body-timeout), or
        // sends it slower than --min-body-rate, are reset: the connection
        // and its other streams go on.
        if (reset_idle_bodies() && !write_output()) return Next::Close;
        plan_deadline();
        if (deadline_ == 0 || now < deadline_) return Next::Wait;
    }
    if (stalled_) {
        // A minimum send rate, not a deadline that every byte restarts (issue
        // 32: a 1-byte WINDOW_UPDATE every 20 s kept 100 streams, and their
        // memory, for as long as the client liked). Kestrel's
        // MinResponseDataRate, 240 bytes/s after a 5 s grace, is the model.
        uint64_t timeout_ms = context_.options.send_timeout_ms;
        if (send_rate_->passed(now, timeout_ms, kMinSendBytesPerSecond)) {
            plan_deadline(); // the next interval, or a stream's body deadline before it
            return Next::Wait;
        }
    }
    // Idle: a GOAWAY says so (RFC 9113 §6.8), if the socket takes it.
    if (!write_blocked_) {
        terminate(Http2Error::NoError);
        write_output();
    }
    return Next::Close;
}

} // namespace lepus
