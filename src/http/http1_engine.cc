#include "http/http1_engine.h"

#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace lepus {
namespace {

constexpr size_t kInitialInput = 4096;
constexpr size_t kMinReadSpace = 1024;
// Enough for every connection that is mid-request at once on a busy loop;
// beyond it states are freed rather than hoarded.
constexpr size_t kMaxPooledStates = 1024;

// The largest head the parser accepts: empty lines before the request line
// (bounded like the line itself), the request line, the field lines; with
// room to spare so that the parser, not the buffer, sets the limit.
size_t max_input(const ParserLimits& limits) {
    return 2 * limits.max_request_line + limits.max_header_block + 4096;
}

} // namespace

std::unique_ptr<Http1RequestState> Http1StatePool::acquire() {
    if (free_.empty()) return std::make_unique<Http1RequestState>(options_);
    auto state = std::move(free_.back());
    free_.pop_back();
    return state;
}

void Http1StatePool::release(std::unique_ptr<Http1RequestState> state, bool clean) {
    if (!clean) {
        state->parser.reset();
        state->chunked.reset();
        state->exchange.response.reset();
        state->exchange.stream.reset();
        state->exchange.stream_fields.clear();
    }
    state->input_begin = state->input_end = 0;
    // A large body or response must not stay pinned in the pool.
    if (state->body.capacity() > size_t{64} * 1024) std::string().swap(state->body);
    if (state->out.capacity() > size_t{128} * 1024) std::string().swap(state->out);
    state->body.clear();
    state->out.clear();
    state->out_sent = 0;
    if (free_.size() < kMaxPooledStates) free_.push_back(std::move(state));
}

Http1Engine::Http1Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                         ExchangeListener& listener)
    : context_(context), transport_(transport), info_(info), listener_(listener) {
    // A fresh connection owes its first head within the header timeout, counted
    // from accept: an idle flood is held no longer than a slowloris.
    deadline_ = context_.clock.now_ms + context_.options.header_timeout_ms;
}

Http1Engine::~Http1Engine() {
    close();
}

void Http1Engine::set_phase(Phase next) {
    auto gauge = [this](Phase phase) -> std::atomic<uint64_t>* {
        if (!context_.gauges) return nullptr;
        if (phase == Phase::ReadingHead || phase == Phase::ReadingBody)
            return &context_.gauges->reading;
        if (phase == Phase::Writing || phase == Phase::Streaming) return &context_.gauges->writing;
        if (phase == Phase::Tunnel) return &context_.gauges->tunnels;
        return nullptr;
    };
    std::atomic<uint64_t>* from = gauge(phase_);
    std::atomic<uint64_t>* to = gauge(next);
    if (from != to) {
        if (from) from->store(from->load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        if (to) to->store(to->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    phase_ = next;
}

Http1Engine::Next Http1Engine::drive() {
    if (closed_) return Next::Close;
    bytes_this_pass_ = 0;
    requests_this_pass_ = 0;
    Step step = Step::Continue;
    while (step == Step::Continue)
        step = run_phase();
    if (step == Step::Close) return Next::Close;
    if (step == Step::Yield) return Next::Yield;
    if (step == Step::Http2) return Next::Http2;
    plan_deadline();
    return Next::Wait;
}

// One state of the machine; the switch is the whole machine, so it stays in one piece.
Http1Engine::Step Http1Engine::run_phase() {
    switch (phase_) {
    case Phase::Idle:
    case Phase::ReadingHead:
        return read_head();
    case Phase::ReadingBody:
        return read_body();
    case Phase::Writing:
        return write_response();
    case Phase::Streaming:
        return stream();
    case Phase::Lingering:
        return linger();
    case Phase::Tunnel:
        return tunnel();
    }
    return Step::Close;
}

// The phase-to-timeout mapping. Idle: keepalive (header timeout from accept
// for a fresh connection); a head: the header deadline, total, set once per
// request, never extended (the slowloris defence); a body: body timeout of
// inactivity; a response: send timeout of inactivity; lingering: total; a
// stream waiting on its backend: none here (the backend has its own).
void Http1Engine::plan_deadline() {
    const Http1Options& options = context_.options;
    uint64_t now = context_.clock.now_ms;
    switch (phase_) {
    case Phase::Idle:
        // Idle: the last response reset what it used (finish_response).
        if (state_ && state_->input_begin == state_->input_end)
            context_.states.release(std::move(state_), true);
        if (requests_ == 0) return; // the header deadline from accept stands
        deadline_ = now + options.keepalive_timeout_ms;
        deadline_exact_ = false;
        return;
    case Phase::ReadingHead:
    case Phase::Lingering:
        deadline_exact_ = true; // set once when the phase began
        return;
    case Phase::ReadingBody:
        deadline_ = now + (write_blocked_ ? options.send_timeout_ms : options.body_timeout_ms);
        deadline_exact_ = false;
        return;
    case Phase::Writing:
        deadline_ = now + options.send_timeout_ms;
        deadline_exact_ = false;
        return;
    case Phase::Streaming: {
        deadline_exact_ = false;
        bool waits_for_body = !write_blocked_ && !body_done_ && !body_blocked_;
        bool rate_bound = state_->exchange.body_holds_backend && options.min_body_rate > 0;
        // The rate's clock runs while the body is waited for, not while the
        // backend holds it back; on_deadline() starts the next interval.
        if (waits_for_body && rate_bound)
            body_rate_.wait(now);
        else
            body_rate_.pause(now);
        if (write_blocked_)
            deadline_ = now + options.send_timeout_ms;
        else if (body_rate_.waiting())
            deadline_ = body_rate_.deadline(options.body_timeout_ms);
        else if (waits_for_body)
            deadline_ = now + options.body_timeout_ms; // the stream waits for the client
        else
            deadline_ = 0;
        return;
    }
    case Phase::Tunnel:
        // Idle both ways for the keepalive timeout: closed (nginx closes a
        // silent WebSocket after proxy_read_timeout alike).
        deadline_ = now + (write_blocked_ ? options.send_timeout_ms : options.keepalive_timeout_ms);
        deadline_exact_ = false;
        return;
    }
}

Http1Engine::Next Http1Engine::on_deadline() {
    if (closed_) return Next::Close;
    if (deadline_ == 0 || context_.clock.now_ms < deadline_) return Next::Wait;
    if (phase_ == Phase::ReadingHead)
        log_info("client %s: request head not complete within the header timeout, closing",
                 info_.peer.to_string().c_str());
    if (phase_ == Phase::Streaming && body_rate_.waiting()) {
        // A body that holds a backend connection: a trickle (a byte every
        // 20 s) would hold it for as long as the client liked (issue 32).
        const Http1Options& options = context_.options;
        if (body_rate_.passed(context_.clock.now_ms, options.body_timeout_ms,
                              options.min_body_rate)) {
            deadline_ = body_rate_.deadline(options.body_timeout_ms);
            return Next::Wait;
        }
        log_info("client %s: request body slower than %llu bytes/s over the body timeout, "
                 "closing",
                 info_.peer.to_string().c_str(),
                 static_cast<unsigned long long>(options.min_body_rate));
        if (!accounted_ && !out_.head_built) account(408, 0);
    }
    return Next::Close;
}

bool Http1Engine::on_shutdown() {
    draining_ = true;
    if (phase_ == Phase::Idle) return true;
    keep_alive_ = false;
    return false;
}

void Http1Engine::close() {
    if (closed_) return;
    closed_ = true;
    if (in_exchange_ && state_) {
        Exchange& exchange = state_->exchange;
        // nginx's 499: the client left before the response was complete.
        if (!accounted_)
            account(exchange.stream && out_.head_built ? out_.status : 499, out_.body_bytes_sent());
        end_exchange();
    }
    set_phase(Phase::Idle);
    if (state_) context_.states.release(std::move(state_));
}

// Reads what the transport has into the input buffer.
Http1Engine::Step Http1Engine::fill_input() {
    Http1RequestState& s = *state_;
    size_t limit = max_input(context_.options.limits);
    if (s.input.size() == 0) s.input.resize(kInitialInput);
    if (s.input_begin == s.input_end) s.input_begin = s.input_end = 0;
    if (s.input.size() - s.input_end < kMinReadSpace) {
        compact_input();
        if (s.input.size() - s.input_end < kMinReadSpace && s.input.size() < limit)
            s.input.resize(std::min(s.input.size() * 2, limit));
    }
    size_t space = s.input.size() - s.input_end;
    if (space == 0) return Step::Wait; // a full buffer waits for the body's consumer
    ssize_t n = transport_.read(s.input.data() + s.input_end, space);
    if (n > 0) {
        s.input_end += size_t(n);
        // A short read drained the socket; the next arrival raises a new edge.
        readable_ = size_t(n) == space || peer_shut_;
        return Step::Continue;
    }
    if (n == 0) {
        peer_closed_ = true;
        readable_ = false;
        return Step::Continue;
    }
    if (n == kIoAgain) {
        readable_ = false;
        return Step::Wait;
    }
    return Step::Close;
}

// Moves the unconsumed bytes to the front of the buffer. A head in flight
// moves with them, so it is parsed again at once: the request's views (and
// so every handler's) always point at its current place.
void Http1Engine::compact_input() {
    Http1RequestState& s = *state_;
    if (s.input_begin == 0) return;
    std::memmove(s.input.data(), s.input.data() + s.input_begin, s.input_end - s.input_begin);
    s.input_end -= s.input_begin;
    s.input_begin = 0;
    if (head_size_ > 0) {
        s.parser.reset();
        s.parser.parse({s.input.data(), head_size_});
    }
}

Http1Engine::Step Http1Engine::read_head() {
    if (!state_) {
        if (!readable_) return Step::Wait;
        state_ = context_.states.acquire();
    }
    Http1RequestState& s = *state_;
    // The pass budget: a client pipelining many requests yields to the others.
    if (requests_this_pass_ >= kMaxRequestsPerPass) return Step::Yield;
    if (requests_ == 0 && s.input_begin == 0 && s.input_end > 0) {
        Step step = detect_http2();
        if (step == Step::Http2) return step;
        if (step == Step::Wait) {
            if (peer_closed_) return Step::Close;
            if (!readable_) return Step::Wait;
            return fill_input();
        }
    }
    if (s.input_end > s.input_begin) {
        std::span<const char> data(s.input.data() + s.input_begin, s.input_end - s.input_begin);
        switch (s.parser.parse(data)) {
        case ParseStatus::Done:
            return on_head_parsed();
        case ParseStatus::Error:
            return respond_error(s.parser.error_status());
        case ParseStatus::Again:
            if (s.input_begin == 0 && s.input_end == max_input(context_.options.limits))
                return respond_error(431); // unreachable with the parser's limits; never a reset
            break;
        }
    }
    if (peer_closed_) return Step::Close; // idle or mid-head: nothing to answer
    if (!readable_) return Step::Wait;
    Step step = fill_input();
    if (step == Step::Continue && phase_ == Phase::Idle && s.input_end > s.input_begin) {
        // The header deadline is total, armed once per request: a trickling
        // client cannot extend it. A fresh connection keeps the one from accept.
        set_phase(Phase::ReadingHead);
        if (requests_ > 0) deadline_ = context_.clock.now_ms + context_.options.header_timeout_ms;
    }
    return step;
}

// RFC 9113 §3.4: the client preface starts every HTTP/2 connection, after
// ALPN "h2" on TLS, or at once on a plain port (h2c with prior knowledge, §3.3).
Http1Engine::Step Http1Engine::detect_http2() {
    static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // An h2c:// listener, or ALPN "h2": whatever comes is HTTP/2's to judge (a
    // bad preface is a connection error there, RFC 9113 §3.4, not an HTTP/1.1 400).
    if (info_.h2c_only) return Step::Http2;
    if (!(info_.secure ? context_.options.http2 : context_.options.h2c)) return Step::Continue;
    if (info_.alpn_h2) return Step::Http2;
    const Http1RequestState& s = *state_;
    std::string_view received(s.input.data(), std::min(s.input_end, kPreface.size()));
    if (!kPreface.starts_with(received)) return Step::Continue;
    return received.size() == kPreface.size() ? Step::Http2 : Step::Wait;
}

std::string_view Http1Engine::pending_input() const {
    if (!state_) return {};
    return {state_->input.data() + state_->input_begin, state_->input_end - state_->input_begin};
}

Http1Engine::Step Http1Engine::on_head_parsed() {
    Http1RequestState& s = *state_;
    const Request& request = s.parser.request();
    const Http1Options& options = context_.options;
    head_size_ = s.parser.head_size();
    ++requests_;
    ++requests_this_pass_;
    keep_alive_ = request.keep_alive && requests_ < options.keepalive_requests && !draining_;
    error_response_ = false;
    body_chunked_ = request.chunked;
    body_left_ = request.content_length.value_or(0);
    body_done_ = !request.has_body();
    // RFC 9110 §10.1.1: 100 (Continue) only to an HTTP/1.1 client, and only
    // once the engine would otherwise wait for the body (not when it has come).
    continue_wanted_ = !body_done_ && request.expect_continue && request.version_minor >= 1;
    continue_sent_ = 0;
    if (body_chunked_) s.chunked.reset(), s.body.clear();

    Exchange& exchange = s.exchange;
    exchange.request = &request;
    exchange.connection = &info_;
    exchange.client = info_.peer; // the router applies --real-ip-from
    exchange.listener = &listener_;
    exchange.protocol = protocol_name(request);
    exchange.now_s = context_.clock.now_s;
    exchange.now_ms = context_.clock.now_ms;
    exchange.keep_alive = keep_alive_;
    exchange.body_holds_backend = false;
    body_rate_ = MinRate();
    exchange.stream_status = 0;
    exchange.stream_fields.clear();
    in_exchange_ = true;
    accounted_ = false;
    if (request.content_length && *request.content_length > options.max_body_size)
        return fail_exchange(413);
    context_.handler.start(exchange);
    return dispatch();
}

// After start() or fail(): stream, or write the complete answer (reading and
// dropping a body first, so the next request starts at the right byte; as
// nginx does, a static resource takes no body).
Http1Engine::Step Http1Engine::dispatch() {
    Exchange& exchange = state_->exchange;
    if (exchange.stream) return start_stream();
    keep_alive_ = keep_alive_ && exchange.response.keep_alive;
    head_sent_ = body_sent_ = 0;
    // A connection that closes after the answer does not read the body first.
    if (body_done_ || !keep_alive_) return start_writing();
    set_phase(Phase::ReadingBody);
    return Step::Continue;
}

Http1Engine::Step Http1Engine::start_writing() {
    Http1RequestState& s = *state_;
    const Response& response = s.exchange.response;
    // The head as text, once, now that the connection's fate is known (a
    // body read to its end or not): into the stream output buffer, which a
    // complete answer does not otherwise use.
    const Request* request = s.exchange.request;
    write_http1_head(response.head, context_.clock.now_s, keep_alive_,
                     request ? request->version_minor : 1, s.out);
    s.out_sent = 0;
    account(response.head.status, response.body_bytes());
    set_phase(Phase::Writing);
    return Step::Continue;
}

void Http1Engine::account(int status, uint64_t body_bytes) {
    accounted_ = true;
    context_.handler.account(state_->exchange, status, body_bytes);
}

// The parser's own errors: before any site is known, the built-in page, then close.
Http1Engine::Step Http1Engine::respond_error(int status) {
    Http1RequestState& s = *state_;
    keep_alive_ = false;
    error_response_ = true;
    Exchange& exchange = s.exchange;
    exchange.request = nullptr;
    exchange.connection = &info_;
    exchange.client = info_.peer;
    exchange.protocol = {};
    // The first line as received, for the access log ("PRI * HTTP/2.0" 400, as nginx).
    std::string_view unparsed(s.input.data() + s.input_begin, s.input_end - s.input_begin);
    exchange.request_line = unparsed.substr(0, std::min(unparsed.find('\n'), kLoggedLineMax));
    if (exchange.request_line.ends_with('\r')) exchange.request_line.remove_suffix(1);
    exchange.response.reset();
    build_error_response(status, false, exchange.response);
    if (status == 400 || status == 414 || status == 431 || status == 501 || status == 505)
        log_info("client %s: %d: %s", info_.peer.to_string().c_str(), status,
                 s.parser.error_reason());
    in_exchange_ = true;
    accounted_ = false;
    head_size_ = s.input_end - s.input_begin; // nothing after an error is read as a request
    body_done_ = true;
    head_sent_ = body_sent_ = 0;
    return start_writing();
}

// An error the engine must answer after the head was parsed: through the
// handler, so that the site's error page applies.
Http1Engine::Step Http1Engine::fail_exchange(int status, const ResponseHead* extra) {
    drop_answer();
    context_.handler.fail(state_->exchange, status, extra);
    body_done_ = true;
    return dispatch();
}

// A stream handed the exchange back (an internal redirect): the handler answers again.
Http1Engine::Step Http1Engine::redirect_exchange() {
    drop_answer();
    context_.handler.redirect(state_->exchange);
    body_done_ = true;
    return dispatch();
}

void Http1Engine::drop_answer() {
    Exchange& exchange = state_->exchange;
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    if (!body_done_) keep_alive_ = false; // the rest of the body is not worth reading
    exchange.keep_alive = keep_alive_;
    exchange.response.reset();
}

// Reads the request body: into the stream, or into the void.
Http1Engine::Step Http1Engine::read_body() {
    body_blocked_ = false;
    for (;;) {
        switch (consume_body()) {
        case BodyProgress::Done:
            body_done_ = true;
            continue_wanted_ = false;
            if (phase_ == Phase::Streaming) {
                state_->exchange.stream->end_body();
                return Step::Continue;
            }
            return start_writing();
        case BodyProgress::StreamFull:
            body_blocked_ = true;
            return Step::Wait; // the stream's progress brings us back
        case BodyProgress::Malformed:
            log_info("client %s: bad chunked body: %s", info_.peer.to_string().c_str(),
                     state_->chunked.error_reason());
            return fail_exchange(state_->chunked.body_too_large() ? 413 : 400);
        case BodyProgress::NeedInput:
            break;
        }
        if (peer_closed_) return Step::Close; // the client left mid-body
        if (continue_wanted_) {
            Step step = send_continue();
            if (step != Step::Continue) return step;
        }
        if (!readable_) return Step::Wait;
        Step step = fill_input();
        if (step != Step::Continue) return step;
    }
}

// Takes the body bytes the buffer holds (after the head): decodes chunked
// framing, offers them to the stream when there is one, and consumes them in
// place, so that what follows (a pipelined request) stays right after the head.
Http1Engine::BodyProgress Http1Engine::consume_body() {
    Http1RequestState& s = *state_;
    ResponseStream* stream = phase_ == Phase::Streaming ? s.exchange.stream.get() : nullptr;
    if (stream && !s.body.empty()) { // decoded earlier, not taken yet
        s.body.erase(0, stream->offer_body(s.body));
        if (!s.body.empty()) return BodyProgress::StreamFull;
    }
    size_t body_start = s.input_begin + head_size_;
    size_t available = s.input_end - body_start;
    char* data = s.input.data() + body_start;
    size_t consumed = 0;
    bool done = false;
    bool full = false;
    if (body_chunked_) {
        auto status = s.chunked.feed({data, available}, consumed, s.body);
        body_rate_.moved(consumed);
        if (status == ChunkedDecoder::Status::Error) return BodyProgress::Malformed;
        done = status == ChunkedDecoder::Status::Done;
        if (!stream)
            s.body.clear();
        else if (!s.body.empty())
            s.body.erase(0, stream->offer_body(s.body));
        full = !s.body.empty();
    } else {
        auto wanted = size_t(std::min<uint64_t>(available, body_left_));
        consumed = stream && wanted > 0 ? stream->offer_body({data, wanted}) : wanted;
        body_rate_.moved(consumed);
        full = consumed < wanted;
        body_left_ -= consumed;
        done = body_left_ == 0;
    }
    std::memmove(data, data + consumed, available - consumed);
    s.input_end -= consumed;
    if (full) return BodyProgress::StreamFull;
    return done ? BodyProgress::Done : BodyProgress::NeedInput;
}

} // namespace lepus
