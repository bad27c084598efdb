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
#include <nghttp2/nghttp2.h>

namespace lepus {

void Http2Engine::plan_deadline() {
    const Http1Options& options = context_.options;
    // Output that cannot leave: the socket is full, or a response waits for
    // the client's flow-control window (a peer that never opens it is closed
    // at the send timeout, as one that never reads).
    bool stalled =
        write_blocked_ || std::any_of(streams_.begin(), streams_.end(), [](const auto& entry) {
            return entry.second->submitted && !entry.second->deferred;
        });
    // The first interval starts when output began to wait; on_deadline()
    // starts the next ones while the client keeps up the minimum rate.
    if (stalled && !stalled_) {
        stall_interval_ms_ = context_.clock.now_ms;
        stall_sent_ = 0;
    }
    stalled_ = stalled;
    if (stalled)
        deadline_ = stall_interval_ms_ + options.send_timeout_ms;
    else if (streams_.empty())
        // The preface and first request under the header deadline, then idle.
        deadline_ = last_activity_ms_ +
                    (requests_ == 0 ? options.header_timeout_ms : options.keepalive_timeout_ms);
    else
        deadline_ = 0; // streams wait on their backends, which have their own timeouts
    // A stream waiting for its client's body: the body timeout, as HTTP/1.1
    // has it (with request buffering no backend timeout would end the wait).
    if (uint64_t body = body_deadline(); body != 0 && (deadline_ == 0 || body < deadline_))
        deadline_ = body;
}

// Whether `stream` waits for request body bytes its response stream would take.
static bool waits_for_body(const Http2Stream& stream) {
    return stream.started && stream.exchange.stream && !stream.request_ended &&
           !stream.body_ended && !stream.submitted && stream.body_pending.empty();
}

uint64_t Http2Engine::body_deadline() const {
    uint64_t earliest = 0;
    for (const auto& [id, stream] : streams_)
        if (waits_for_body(*stream)) {
            uint64_t at = stream->body_active_ms + context_.options.body_timeout_ms;
            if (earliest == 0 || at < earliest) earliest = at;
        }
    return earliest;
}

bool Http2Engine::reset_idle_bodies() {
    bool any = false;
    for (auto& [id, stream] : streams_) {
        if (!waits_for_body(*stream) ||
            stream->body_active_ms + context_.options.body_timeout_ms > context_.clock.now_ms)
            continue;
        // nginx's client_body_timeout: 408 in the log; the stream is cancelled.
        log_info("client %s: stream %d sent no body bytes within the body timeout, resetting it",
                 info_.peer.to_string().c_str(), int(id));
        if (!stream->accounted) context_.handler.account(stream->exchange, 408, 0);
        stream->accounted = true;
        reset_stream(id, NGHTTP2_CANCEL);
        any = true;
    }
    return any;
}

Http2Engine::Next Http2Engine::on_deadline() {
    // Fresh: a stream's body may have come (or ended) since the last plan.
    if (!lingering_ && !closed_) plan_deadline();
    if (deadline_ == 0 || context_.clock.now_ms < deadline_) return Next::Wait;
    if (lingering_) return Next::Close;
    if (stalled_) {
        // A minimum send rate, not a deadline that every byte restarts (issue
        // 32: a 1-byte WINDOW_UPDATE every 20 s kept 100 streams, and their
        // memory, for as long as the client liked). Kestrel's
        // MinResponseDataRate, 240 bytes/s after a 5 s grace, is the model.
        uint64_t timeout_ms = context_.options.send_timeout_ms;
        uint64_t wanted = std::max<uint64_t>(kMinSendBytesPerSecond * timeout_ms / 1000, 1);
        if (stall_sent_ >= wanted) {
            stall_interval_ms_ = context_.clock.now_ms;
            stall_sent_ = 0;
            deadline_ = stall_interval_ms_ + timeout_ms;
            return Next::Wait;
        }
    } else if (reset_idle_bodies()) {
        // A stream whose client stopped sending its body was reset for it
        // (--body-timeout): the connection and its other streams go on.
        if (!write_output()) return Next::Close;
        plan_deadline();
        return Next::Wait;
    }
    // Idle: a GOAWAY says so (RFC 9113 §6.8), if the socket takes it.
    if (!write_blocked_) {
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        write_output();
    }
    return Next::Close;
}

} // namespace lepus
