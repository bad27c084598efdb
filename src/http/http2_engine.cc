#include "http/http2_engine.h"

#include "http/detail/http2_stream.h"
#include "log/error_log.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace lepus {

Http2Engine::Http2Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                         ExchangeListener& listener, std::string_view received, Http2Gauges* gauges)
    : context_(context), transport_(transport), info_(info), listener_(listener), gauges_(gauges),
      hpack_decoder_(HpackDecoder::Limits{kHpackDefaultTableSize, kMaxHeaderListDecoded}),
      input_(received.empty() ? nullptr : std::make_unique<std::string>(received)),
      last_activity_ms_(context.clock.now_ms) {
    // Our SETTINGS first (§3.4), then the connection's window opened wide.
    const std::pair<uint16_t, uint32_t> settings[] = {
        {http2_setting::kMaxConcurrentStreams, kMaxConcurrentStreams},
        {http2_setting::kInitialWindowSize, kStreamWindow},
        {http2_setting::kMaxHeaderListSize, kMaxHeaderList},
        // RFC 9218: streams are scheduled by the `priority` header field's
        // urgency (and incremental flag), not RFC 7540's tree, which §2.1 of
        // RFC 9113 deprecated: CSS and scripts (u=0..2) before images (u=5).
        {http2_setting::kNoRfc7540Priorities, 1},
    };
    http2_append_settings(output(), settings);
    http2_append_window_update(output(), 0, kConnectionWindow - kHttp2DefaultWindow);
    if (gauges_) {
        gauges_->connections.fetch_add(1, std::memory_order_relaxed);
        gauges_->connections_total.fetch_add(1, std::memory_order_relaxed);
    }
    plan_deadline();
}

Http2Engine::~Http2Engine() {
    close();
}

Http2Engine::Next Http2Engine::drive() {
    if (closed_) return Next::Close;
    if (lingering_) return linger();
    bool open = read_input();
    poll_streams();
    if (!write_output() || !open) return Next::Close;
    if (stop_reading_ && output_empty()) return start_lingering(); // our GOAWAY is out
    if (draining_ && streams_.empty() && output_empty()) return start_lingering();
    plan_deadline();
    // Input left unread behind a queued GOAWAY waits: the socket's writability
    // or the deadline drives the connection on.
    return readable_ && !stop_reading_ ? Next::Yield : Next::Wait;
}

// An orderly close: our FIN first, then what the client still sends (a PING
// after its GOAWAY) is read and dropped until its own FIN or linger_ms, as the
// HTTP/1.1 engine lingers. Closing with unread bytes makes Linux answer with
// RST instead of FIN, and a PING that arrives a moment after the GOAWAY would
// then reset the connection under our last frames (h2spec's GOAWAY case saw
// that). Bounded: a client that keeps sending is closed at the deadline.
Http2Engine::Next Http2Engine::start_lingering() {
    transport_.shutdown_write();
    lingering_ = true;
    deadline_ = context_.clock.now_ms + context_.options.linger_ms;
    return linger();
}

Http2Engine::Next Http2Engine::linger() {
    ssize_t drained = drain_input(transport_, kMaxReadPerPass);
    if (drained == kIoAgain) return Next::Wait;
    return drained == 0 ? Next::Close : Next::Yield; // the client's FIN, or a broken socket
}

bool Http2Engine::read_input() {
    if (input_) {
        const std::unique_ptr<std::string> input = std::move(input_);
        decoder_.feed(*input, *this);
        sweep_streams();
        if (decoder_.stopped() && !stop_reading_) return false;
    }
    char buffer[16384];
    size_t total = 0;
    // Once a GOAWAY that ends the connection is queued, it leaves before
    // anything more is read.
    while (readable_ && !stop_reading_ && total < kMaxReadPerPass) {
        ssize_t n = transport_.read(buffer, sizeof buffer);
        if (n == kIoAgain) {
            readable_ = false;
            break;
        }
        if (n <= 0) {
            // The client closed or broke the connection: nothing more to answer.
            peer_closed_ = true;
            return false;
        }
        total += size_t(n);
        last_activity_ms_ = context_.clock.now_ms;
        // A short read drained the socket (Transport's contract): the next
        // arrival raises a new edge, so no read that would only say EAGAIN
        // (but a FIN seen with the data must still be read).
        if (size_t(n) < sizeof buffer && !peer_shut_) readable_ = false;
        decoder_.feed({buffer, size_t(n)}, *this);
        sweep_streams();
        // Decoding stopped without a GOAWAY to send: nothing more to do.
        if (decoder_.stopped() && !stop_reading_) return false;
    }
    return true;
}

bool Http2Engine::write_output() {
    if (output_broken_) return false;
    for (;;) {
        // Answers' frames, a batch of up to 64 KiB (file payloads counted,
        // whether copied or left in the file), once the control frames
        // queued while reading are out or with them.
        if (!stop_reading_ && output_pending() < kBatchBytes) produce();
        if (output_empty()) {
            write_blocked_ = false;
            queued_acks_ = 0; // the client reads what it is owed
            // An idle connection keeps no output buffer (up to 64 KiB), nor
            // the room of a burst of streams (100 pointers),
            if (streams_.empty()) {
                output_.reset();
                if (streams_.capacity() > 8) decltype(streams_)().swap(streams_);
                // Nor the decoder's table's doubling slack, nor an encoder
                // table at all (issue 38: the next head inserts its date and
                // server again), after the 1st, 2nd, 4th, 8th... request
                // only: a client that inserts with every request would
                // otherwise have the tables grown and shrunk again each time
                // (h2: +70 instructions a request).
                if ((requests_ & (requests_ - 1)) == 0) {
                    hpack_decoder_.shrink_table();
                    hpack_encoder_.forget_table();
                    // And the send-rate state: nothing waits now (freed after
                    // every request it cost 55 instructions a request, h2).
                    send_rate_.reset();
                    stalled_ = false;
                }
            }
            return true;
        }
        uint64_t before = output_pending();
        Http2Output::Status status = output_->write(transport_);
        if (output_pending() < before) {
            last_activity_ms_ = context_.clock.now_ms;
            if (send_rate_) send_rate_->moved(before - output_pending());
        }
        switch (status) {
        case Http2Output::Status::Done:
            continue;
        case Http2Output::Status::Again:
            write_blocked_ = true;
            return true;
        case Http2Output::Status::Error:
            return false;
        case Http2Output::Status::FileEnded:
            // Part of a DATA frame is out and the rest cannot come: no frame
            // (not even GOAWAY) can follow it, only the end of the connection.
            report_internal_error("sendfile for an HTTP/2 response", output_->failed_path(),
                                  output_->file_error());
            output_broken_ = true;
            output_.reset();
            return false;
        }
    }
}

void Http2Engine::start_exchange(Http2Stream& stream) {
    stream.started = true;
    stream.body_active_ms = context_.clock.now_ms;
    ++requests_;
    Request& request = stream.request;
    int refused = stream.complete_request();
    Exchange& exchange = stream.exchange;
    exchange.request = &request;
    exchange.connection = &info_;
    exchange.listener = &listener_;
    exchange.client = info_.peer; // the router applies --real-ip-from
    exchange.protocol = protocol_name(request);
    exchange.now_s = context_.clock.now_s;
    exchange.now_ms = context_.clock.now_ms;
    exchange.keep_alive = true;
    if (stream.too_large) return fail_exchange(stream, 431);
    if (refused) return fail_exchange(stream, refused);
    if (request.content_length && *request.content_length > context_.options.max_body_size)
        return fail_exchange(stream, 413);
    context_.handler.start(exchange);
    if (!exchange.stream) return submit_response(stream);
    offer_body(stream);
}

bool Http2Engine::offer_body(Http2Stream& stream) {
    ResponseStream* backend = stream.exchange.stream.get();
    if (!backend || stream.body_ended) return false;
    bool progress = false;
    if (!stream.body_pending.empty()) {
        size_t taken = backend->offer_body(stream.body_pending);
        if (taken > 0) {
            stream.body_pending.erase(0, taken);
            consume(&stream, taken);
            progress = true;
        }
    }
    if (stream.request_ended && stream.body_pending.empty()) {
        stream.body_ended = true;
        backend->end_body();
        progress = true;
    }
    return progress;
}

void Http2Engine::poll_streams() {
    for (auto& owned : streams_) {
        Http2Stream& stream = *owned;
        if (!stream.started || !stream.exchange.stream || stream.reset_queued || stream.closed)
            continue;
        ResponseStream& backend = *stream.exchange.stream;
        StreamState state = backend.poll();
        // A body held while the stream could not take it (a password check,
        // a rate limit's delay) goes now; a poll then sends it, as HTTP/1.1
        // polls after offering: a stream that acts only when polled (a
        // buffered body opening its backend at its end) would otherwise wait
        // for a progress that never comes.
        if (offer_body(stream)) state = backend.poll();
        if (state == StreamState::Pending) continue;
        if (!stream.submitted) {
            if (state == StreamState::Ready)
                submit_stream_head(stream);
            else if (state == StreamState::Redirect)
                redirect_exchange(stream);
            else
                fail_failed_stream(stream);
            continue;
        }
        if (stream_stopped(state)) {
            // Part of the answer is out: the stream is reset, never completed wrongly.
            reset_stream(stream.id, Http2Error::InternalError);
            continue;
        }
        // Body bytes that came go out at the next produce().
    }
}

void Http2Engine::submit_response(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    const Response& response = exchange.response;
    stream.status = response.head.status;
    stream.submitted = true;
    stream.head_pending = true;
    stream.accounted = true;
    context_.handler.account(exchange, response.head.status, response.body_bytes());
    stream.has_body =
        response.body_bytes() > 0 && !response_has_no_body(*exchange.request, response.head.status);
    hold(stream);
}

void Http2Engine::submit_stream_head(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    const Request& request = *exchange.request;
    ResponseStream& backend = *exchange.stream;
    const StreamHead& head = backend.head();
    int status = exchange.stream_status ? exchange.stream_status : head.status;
    if (head.status < 200 || head.status > 599) {
        log_error("the backend of \"%.*s\" answered status %d: 502", int(request.target.size()),
                  request.target.data(), head.status);
        return fail_exchange(stream, 502);
    }
    bool no_body = response_has_no_body(request, status);
    std::optional<uint64_t> length = head.content_length;
    if (length && backend.ended() && backend.body().size() < *length && !no_body) {
        log_error("the backend's response to \"%.*s\" ended short of its Content-Length: 502",
                  int(request.target.size()), request.target.data());
        return fail_exchange(stream, 502);
    }
    if (!length && backend.ended() && !request.is_head()) length = backend.body().size();
    Response& response = exchange.response;
    response.reset();
    begin_head(status, true, response);
    ResponseHead& out_head = response.head;
    for (const Header& header : head.headers)
        if (!is_backend_own_field(header.name)) out_head.add(header.name, header.value);
    exchange.stream_fields.for_each(
        [&](std::string_view name, std::string_view value) { out_head.add(name, value); });
    if (length && status != 204 && status != 304) out_head.content_length = *length;
    stream.status = status;
    stream.submitted = true;
    stream.head_pending = true;
    if (no_body) {
        // The backend's body (if any) drains into its pool when the stream is let go.
        stream.accounted = true;
        context_.handler.account(exchange, status, 0);
        return hold(stream);
    }
    stream.relaying = true;
    stream.has_body = true;
    hold(stream);
}

void Http2Engine::hold(Http2Stream& stream) {
    stream.held = stream.held_now();
    held_bytes_ += stream.held;
    if (gauges_)
        gauges_->held_bytes.store(gauges_->held_bytes.load(std::memory_order_relaxed) + stream.held,
                                  std::memory_order_relaxed);
}

bool Http2Engine::refuses_new_stream() const {
    // The sums are cheap; blocked_bytes() walks the streams only past them.
    uint64_t reactor = gauges_ ? gauges_->held_bytes.load(std::memory_order_relaxed) : 0;
    if (held_bytes_ <= kBlockedShare ||
        (held_bytes_ <= kMaxBlockedBytes && reactor <= kMaxHeldPerReactor))
        return false;
    uint64_t blocked = blocked_bytes();
    return blocked > kMaxBlockedBytes || (blocked > kBlockedShare && reactor > kMaxHeldPerReactor);
}

uint64_t Http2Engine::blocked_bytes() const {
    // Nothing leaves while the client does not read, or while the
    // connection's window is closed (RFC 9113 §6.9.1).
    bool all = write_blocked_ || send_window_ <= 0;
    uint64_t blocked = 0;
    for (const auto& stream : streams_) {
        if (!stream->submitted || (!all && stream->send_window > 0)) continue;
        blocked += stream->held;
        if (stream->relaying && stream->exchange.stream)
            blocked += stream->exchange.stream->body().size();
    }
    return blocked;
}

void Http2Engine::fail_failed_stream(Http2Stream& stream) {
    const ResponseStream& backend = *stream.exchange.stream;
    // The fields live in the stream, which fail_exchange lets go first.
    ResponseHead extra;
    for (const Header& field : backend.error_fields())
        extra.add(field.name, field.value);
    fail_exchange(stream, backend.error_status(), &extra);
}

void Http2Engine::fail_exchange(Http2Stream& stream, int status, const ResponseHead* extra) {
    drop_answer(stream);
    context_.handler.fail(stream.exchange, status, extra);
    answer_again(stream);
}

// A stream handed the exchange back (an internal redirect): the handler answers again.
void Http2Engine::redirect_exchange(Http2Stream& stream) {
    drop_answer(stream);
    context_.handler.redirect(stream.exchange);
    answer_again(stream);
}

void Http2Engine::drop_answer(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    stream.started = true;
    stream.body_ended = true; // nobody reads the rest of the body
    if (!stream.body_pending.empty()) {
        consume(&stream, stream.body_pending.size());
        std::string().swap(stream.body_pending);
    }
    exchange.response.reset();
}

void Http2Engine::answer_again(Http2Stream& stream) {
    if (stream.exchange.stream) {
        // An error page run by a script: relayed like any stream.
        stream.body_ended = false;
        stream.request_ended = true;
        offer_body(stream);
        return;
    }
    submit_response(stream);
}

void Http2Engine::finish_stream(Http2Stream& stream) {
    end_stream_exchange(context_.handler, stream);
    held_bytes_ -= stream.held;
    if (gauges_) {
        gauges_->streams.fetch_sub(1, std::memory_order_relaxed);
        gauges_->held_bytes.store(gauges_->held_bytes.load(std::memory_order_relaxed) - stream.held,
                                  std::memory_order_relaxed);
    }
}

bool Http2Engine::on_shutdown() {
    if (closed_ || lingering_) return true;
    draining_ = true;
    // GOAWAY with the last stream taken: those in flight finish (RFC 9113 §6.8).
    if (!goaway_sent_) http2_append_goaway(output(), highest_stream_id_, Http2Error::NoError);
    goaway_sent_ = true;
    write_output();
    return streams_.empty();
}

void Http2Engine::close() {
    if (closed_) return;
    closed_ = true;
    for (auto& stream : streams_)
        finish_stream(*stream);
    streams_.clear();
    last_found_ = nullptr;
    output_.reset(); // the files of segments not sent close now
    if (gauges_) gauges_->connections.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace lepus
