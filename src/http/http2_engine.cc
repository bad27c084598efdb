#include "http/http2_engine.h"

#include "http/detail/http2_callbacks.h"
#include "http/detail/http2_head.h"
#include "http/detail/http2_memory.h"
#include "http/detail/http2_stream.h"
#include "log/error_log.h"

#include <algorithm>
#include <cstring>
#include <nghttp2/nghttp2.h>
#include <optional>
#include <vector>

namespace lepus {

namespace {

// A response's header block as nghttp2_nv, in an array shared by the
// reactor's connections (each reactor is one thread, and nghttp2 copies the
// array at submit): an idle connection keeps none of it. The names and
// values stay in the stream's head_text and its response head (see
// detail::head_to_fields).
const std::vector<nghttp2_nv>& head_fields(Http2Stream& stream, const ResponseHead& head,
                                           time_t now) {
    thread_local std::vector<nghttp2_nv> fields;
    detail::head_to_fields(head, now, stream.head_text, fields);
    return fields;
}

} // namespace

Http2Engine::Http2Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                         ExchangeListener& listener, std::string_view received, Http2Gauges* gauges)
    : context_(context), transport_(transport), info_(info), listener_(listener), gauges_(gauges),
      memory_(std::make_unique<detail::Http2Memory>()), input_(received),
      last_activity_ms_(context.clock.now_ms) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    Http2Callbacks::install(callbacks);
    nghttp2_option* option = nullptr;
    nghttp2_option_new(&option);
    // Request body windows open as the backend takes the bytes (offer_body).
    nghttp2_option_set_no_auto_window_update(option, 1);
    // CVE-2023-44487 (rapid reset): past a burst of 1000 resets, 33 a second.
    nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33);
    // CVE-2024-27316: a header block in at most 8 CONTINUATION frames.
    nghttp2_option_set_max_continuations(option, 8);
    // PING and SETTINGS floods: ACKs queued for a peer that does not read.
    nghttp2_option_set_max_outbound_ack(option, 1000);
    nghttp2_option_set_max_settings(option, 32);
    nghttp2_session_server_new3(&session_, callbacks, this, option, memory_->mem());
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 256 * 1024},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderList},
        // RFC 9218: streams are scheduled by the `priority` header field's
        // urgency (and incremental flag), not RFC 7540's tree, which §2.1 of
        // RFC 9113 deprecated: CSS and scripts (u=0..2) before images (u=5).
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    // The connection's window: room for several streams' bodies at once.
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 20);
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
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_) &&
        output_.empty())
        return start_lingering(); // GOAWAY exchanged and every stream done
    if (draining_ && streams_.empty() && output_.empty()) return start_lingering();
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
    if (!input_.empty()) {
        bool fed = feed(input_.data(), input_.size());
        std::string().swap(input_);
        if (!fed) return false;
    }
    char buffer[16384];
    size_t total = 0;
    // Once a GOAWAY that ends the connection is queued, it leaves before
    // anything more is read (nghttp2 would ignore the rest).
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
        if (!feed(buffer, size_t(n))) return false;
    }
    return true;
}

// Hands bytes to nghttp2, looking at some frame headers before nghttp2 sees
// them: with RFC 9218 priorities nghttp2 keeps no closed stream and ignores
// DATA for a stream it does not know, where RFC 9113 §5.1 makes DATA on a
// stream the client closed or reset a STREAM_CLOSED error; and PRIORITY has
// two errors of its own (§6.3). Bytes go to nghttp2 in runs as long as they
// can be: a run ends only before the last byte of a DATA or PRIORITY frame
// header (nghttp2 acts on a header at its last byte), so that the check sees
// the state the frames before it left, and after a PRIORITY payload. One
// nghttp2_session_mem_recv per read for most reads, not two per frame (200
// instructions a request under h2load -m10). A GOAWAY that ends the
// connection, queued by a callback inside a run, makes nghttp2 ignore the
// rest of its input (nghttp2_session_terminate_session); the callbacks that
// open streams check stop_reading_ too.
bool Http2Engine::feed(const char* data, size_t size) {
    const char* end = data + size;
    const char* run = data; // the first byte not yet handed to nghttp2
    auto hand_over = [&](const char* to) {
        if (to == run) return true;
        ssize_t used = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(run),
                                                size_t(to - run));
        run = to;
        if (used < 0) {
            log_info("client %s: HTTP/2: %s", info_.peer.to_string().c_str(),
                     nghttp2_strerror(int(used)));
            return false;
        }
        return true;
    };
    for (const char* at = data; at < end;) {
        if (preface_left_ > 0) {
            size_t chunk = std::min(size_t(end - at), preface_left_);
            preface_left_ -= chunk;
            at += chunk;
        } else if (frame_left_ > 0) {
            size_t chunk = size_t(std::min<uint64_t>(uint64_t(end - at), frame_left_));
            if (priority_have_ < priority_.size() && priority_stream_ != 0) {
                chunk = std::min(chunk, priority_.size() - priority_have_);
                std::memcpy(priority_.data() + priority_have_, at, chunk);
                priority_have_ += chunk;
                frame_left_ -= chunk;
                at += chunk;
                if (priority_have_ == priority_.size()) {
                    if (!hand_over(at)) return false;
                    if (stop_reading_) return true;
                    check_priority();
                    if (stop_reading_) return true; // the rest is dropped: the GOAWAY goes first
                }
                continue;
            }
            frame_left_ -= chunk;
            at += chunk;
        } else {
            size_t chunk = std::min(size_t(end - at), frame_header_.size() - header_have_);
            std::memcpy(frame_header_.data() + header_have_, at, chunk);
            header_have_ += chunk;
            at += chunk;
            if (header_have_ < frame_header_.size()) continue;
            header_have_ = 0;
            const auto* h = reinterpret_cast<const uint8_t*>(frame_header_.data());
            frame_left_ = uint32_t(h[0]) << 16 | uint32_t(h[1]) << 8 | h[2];
            priority_stream_ = 0;
            if (h[3] != NGHTTP2_DATA && h[3] != NGHTTP2_PRIORITY) continue;
            if (!hand_over(at - 1)) return false;
            if (stop_reading_) return true;
            auto id = int32_t((uint32_t(h[5] & 0x7f) << 24) | uint32_t(h[6]) << 16 |
                              uint32_t(h[7]) << 8 | h[8]);
            if (h[3] == NGHTTP2_DATA && id % 2 == 1 && id <= highest_stream_id_ &&
                !nghttp2_session_find_stream(session_, id) && !ignores_frames_on(id))
                terminate(NGHTTP2_STREAM_CLOSED);
            // PRIORITY frames are ignored under RFC 9218 (nghttp2 skips them
            // whole), but RFC 9113 §6.3 still has two errors for them.
            if (h[3] == NGHTTP2_PRIORITY && id == 0)
                terminate(NGHTTP2_PROTOCOL_ERROR);
            else if (h[3] == NGHTTP2_PRIORITY && frame_left_ == priority_.size())
                priority_stream_ = id, priority_have_ = 0;
            if (stop_reading_) return true;
        }
    }
    return hand_over(end);
}

bool Http2Engine::write_output() {
    if (output_broken_) return false;
    for (;;) {
        if (output_.empty()) {
            // Frames from nghttp2, gathered into one batch of up to 64 KiB
            // (file payloads counted, whether copied or left in the file).
            while (output_.pending() < uint64_t{64} * 1024) {
                const uint8_t* data = nullptr;
                ssize_t n = nghttp2_session_mem_send(session_, &data);
                if (n < 0) return false;
                if (n == 0) break;
                trimmed_ = false; // the frame buffer's pages are back
                output_.append({reinterpret_cast<const char*>(data), size_t(n)});
            }
            if (output_.empty()) {
                write_blocked_ = false;
                // An idle connection keeps no output buffer (up to 64 KiB).
                if (streams_.empty()) output_.release();
                return true;
            }
        }
        uint64_t before = output_.pending();
        Http2Output::Status status = output_.write(transport_);
        if (output_.pending() < before) {
            last_activity_ms_ = context_.clock.now_ms;
            send_rate_.moved(before - output_.pending());
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
            report_internal_error("sendfile for an HTTP/2 response", output_.failed_path(),
                                  output_.file_error());
            output_broken_ = true;
            output_.release();
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
            nghttp2_session_consume(session_, stream.id, taken);
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
    for (auto& [id, owned] : streams_) {
        Http2Stream& stream = *owned;
        if (!stream.started || !stream.exchange.stream || stream.reset_queued) continue;
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
            reset_stream(id, NGHTTP2_INTERNAL_ERROR);
            continue;
        }
        if (stream.deferred && (!backend.body().empty() || backend.ended())) {
            stream.deferred = false;
            nghttp2_session_resume_data(session_, id);
        }
    }
}

// RFC 9113 §5.3.1: a stream cannot depend on itself (a stream error).
void Http2Engine::check_priority() {
    const auto* p = reinterpret_cast<const uint8_t*>(priority_.data());
    auto dependency =
        int32_t((uint32_t(p[0] & 0x7f) << 24) | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]);
    if (dependency == priority_stream_) {
        // A RST_STREAM cannot name an idle stream (§5.1): then the whole connection.
        if (nghttp2_session_find_stream(session_, priority_stream_))
            reset_stream(priority_stream_, NGHTTP2_PROTOCOL_ERROR);
        else
            terminate(NGHTTP2_PROTOCOL_ERROR);
    }
    priority_stream_ = 0;
}

void Http2Engine::reset_stream(int32_t id, uint32_t error_code) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, error_code);
    if (auto it = streams_.find(id); it != streams_.end()) it->second->reset_queued = true;
}

// The memory of closed client streams: one bit per id among the last
// kRememberedStreams, set while frames on that stream are to be ignored.
// A new id is set (refused, until nghttp2 opens it and on_begin_headers
// says so), the ids it skips are cleared (idle, so closed: §5.1.1).
void Http2Engine::stream_id_used(int32_t id) {
    auto bit = [](int32_t at) { return size_t(at >> 1) % kRememberedStreams; };
    int32_t from = highest_stream_id_ + 2;
    if (highest_stream_id_ == 0 || (id - highest_stream_id_) / 2 >= int32_t(kRememberedStreams))
        ignored_streams_.fill(0), from = id;
    for (int32_t skipped = from; skipped < id; skipped += 2)
        ignored_streams_[bit(skipped) / 64] &= ~(uint64_t{1} << bit(skipped) % 64);
    ignored_streams_[bit(id) / 64] |= uint64_t{1} << bit(id) % 64;
    highest_stream_id_ = id;
    roll_reset_window();
    ++streams_opened_;
}

void Http2Engine::stream_opened(int32_t id) {
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    ignored_streams_[bit / 64] &= ~(uint64_t{1} << bit % 64);
}

void Http2Engine::reset_sent(int32_t id) {
    if (id % 2 == 0 || id > highest_stream_id_) return;
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    ignored_streams_[bit / 64] |= uint64_t{1} << bit % 64;
}

bool Http2Engine::ignores_frames_on(int32_t id) const {
    // Older than the memory: whatever it was, a late frame is let go.
    if ((highest_stream_id_ - id) / 2 >= int32_t(kRememberedStreams)) return true;
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    return ignored_streams_[bit / 64] >> bit % 64 & 1;
}

void Http2Engine::roll_reset_window() {
    if (context_.clock.now_ms - reset_window_ms_ < kResetWindowMs) return;
    reset_window_ms_ = context_.clock.now_ms;
    resets_ = 0;
    streams_opened_ = 0;
}

void Http2Engine::count_reset() {
    roll_reset_window();
    ++resets_;
    bool mostly_resets = resets_ > kResetsTolerated && uint64_t{resets_} * 2 > streams_opened_;
    if (stop_reading_ || (!mostly_resets && resets_ <= kResetsMax)) return;
    log_info("client %s: HTTP/2: %u streams reset of %u opened in %llu s: ENHANCE_YOUR_CALM",
             info_.peer.to_string().c_str(), resets_, streams_opened_,
             static_cast<unsigned long long>(kResetWindowMs / 1000));
    terminate(NGHTTP2_ENHANCE_YOUR_CALM);
}

void Http2Engine::terminate(uint32_t error_code) {
    nghttp2_session_terminate_session(session_, error_code);
    stop_reading_ = true;
}

void Http2Engine::submit_response(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    const Response& response = exchange.response;
    stream.status = response.head.status;
    const std::vector<nghttp2_nv>& nva = head_fields(stream, response.head, context_.clock.now_s);
    stream.submitted = true;
    stream.accounted = true;
    context_.handler.account(exchange, response.head.status, response.body_bytes());
    nghttp2_data_provider provider{};
    provider.source.ptr = &stream;
    provider.read_callback = Http2Callbacks::read_body;
    bool body =
        response.body_bytes() > 0 && !response_has_no_body(*exchange.request, response.head.status);
    nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(),
                            body ? &provider : nullptr);
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
    const std::vector<nghttp2_nv>& nva = head_fields(stream, out_head, context_.clock.now_s);
    stream.submitted = true;
    if (no_body) {
        // The backend's body (if any) drains into its pool when the stream is let go.
        stream.accounted = true;
        context_.handler.account(exchange, status, 0);
        nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(), nullptr);
        return hold(stream);
    }
    stream.relaying = true;
    nghttp2_data_provider provider{};
    provider.source.ptr = &stream;
    provider.read_callback = Http2Callbacks::read_body;
    nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(), &provider);
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
    bool all = write_blocked_ || nghttp2_session_get_remote_window_size(session_) <= 0;
    uint64_t blocked = 0;
    for (const auto& [id, stream] : streams_) {
        if (!stream->submitted ||
            (!all && nghttp2_session_get_stream_remote_window_size(session_, id) > 0))
            continue;
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
        nghttp2_session_consume(session_, stream.id, stream.body_pending.size());
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
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    write_output();
    return streams_.empty();
}

void Http2Engine::close() {
    if (closed_) return;
    closed_ = true;
    for (auto& [id, stream] : streams_)
        finish_stream(*stream);
    streams_.clear();
    last_found_ = nullptr;
    output_.release(); // the files of segments not sent close now
    nghttp2_session_del(session_);
    session_ = nullptr;
    if (gauges_) gauges_->connections.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace lepus
