// Http1Engine's streaming half: a response that a backend produces over time
// (ResponseStream: FastCGI today), framed for HTTP/1.1 as it arrives.
//
//   start_stream  -> the stream gets the request body as it arrives (or its
//                    end at once), with back-pressure: a stream that takes no
//                    more stops the reading of the client
//   stream        -> until the stream's head is ready: Pending waits for its
//                    progress, Failed answers its status through the router
//                    (502/503/504, error pages apply)
//   relay_stream  -> the head, then the body: Content-Length when the backend
//                    gave one or the whole response is already here, else
//                    chunked (HTTP/1.1) or close-delimited (HTTP/1.0); at most
//                    kStreamOutHighWater bytes queued for the client, the
//                    backend's own bound behind that
//                 -> the stream ended and everything is written: finish(),
//                    keepalive as usual.
//
// After the head is out, a failure closes the connection, so that a torn
// response never looks complete (a chunked one lacks its last chunk, a sized
// one its last bytes).
#include "base/ascii.h"
#include "http/http1_engine.h"
#include "http/response.h"
#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lepus {

Http1Engine::Step Http1Engine::start_stream() {
    Http1RequestState& s = *state_;
    s.out.clear();
    s.out_sent = 0;
    out_ = StreamOutput{};
    write_blocked_ = false;
    set_phase(Phase::Streaming);
    if (body_done_) s.exchange.stream->end_body();
    return Step::Continue;
}

Http1Engine::Step Http1Engine::stream() {
    ResponseStream& stream = *state_->exchange.stream;
    // poll() first: it sends the request once a backend connection is there,
    // after which the stream can take the body bytes waiting here.
    StreamState state = stream.poll();
    if (stream_stopped(state)) return stream_failed(state);
    if (!body_done_) {
        Step step = read_body();
        if (step == Step::Close || phase_ != Phase::Streaming) return step;
        // Waiting for the client's body does not stop the response.
        state = stream.poll(); // sends what the body gave
        if (stream_stopped(state)) return stream_failed(state);
    }
    if (peer_shut_ && body_done_ && !out_.finished && transport_.peer_left()) {
        // The client shut its side while the backend works. Nothing pending
        // means it left (a pipelined request would be waiting here): stop
        // now; the stream lets its backend connection drain into its pool.
        return Step::Close;
    }
    if (state == StreamState::Pending) return Step::Wait;
    if (!out_.head_built && !build_stream_head()) return fail_exchange(502);
    if (phase_ == Phase::Tunnel) return Step::Continue;
    return relay_stream();
}

Http1Engine::Step Http1Engine::stream_failed(StreamState state) {
    const Request& request = *state_->exchange.request;
    if (state == StreamState::Broken || out_.head_built) {
        // Part of the response is out: a complete-looking one must not follow.
        log_error("the response to \"%.*s\" broke off after its head was sent: closing the "
                  "client connection",
                  int(request.target.size()), request.target.data());
        return Step::Close;
    }
    if (state == StreamState::Redirect) return redirect_exchange();
    ResponseStream& stream = *state_->exchange.stream;
    // The fields live in the stream, which fail_exchange lets go first.
    ResponseHead extra;
    for (const Header& field : stream.error_fields())
        extra.add(field.name, field.value);
    return fail_exchange(stream.error_status(), &extra);
}

// Builds the response head from the stream's; false when the response cannot
// be sent as the backend gave it (answered 502 instead, nothing sent yet).
bool Http1Engine::build_stream_head() {
    Http1RequestState& s = *state_;
    Exchange& exchange = s.exchange;
    const Request& request = *exchange.request;
    ResponseStream& stream = *exchange.stream;
    const StreamHead& head = stream.head();
    int status = exchange.stream_status ? exchange.stream_status : head.status;
    if (head.status == 101 && head.upgrade && !exchange.stream_status) {
        build_tunnel_head();
        return true;
    }
    if (head.status < 200 || head.status > 599) {
        // RFC 9110 §15.2: 1xx is interim, never the answer (a 101 would turn
        // a front proxy into a tunnel); a backend must not choose it.
        log_error("the backend of \"%.*s\" answered status %d: 502", int(request.target.size()),
                  request.target.data(), head.status);
        return false;
    }
    bool no_body = response_has_no_body(request, status);
    std::optional<uint64_t> length = head.content_length;
    if (length && stream.ended() && stream.body().size() < *length && !no_body) {
        // Nothing is sent yet, so the client can still get an honest 502
        // instead of a torn response.
        log_error("the backend's response to \"%.*s\" ended %llu bytes short of its "
                  "Content-Length: 502",
                  int(request.target.size()), request.target.data(),
                  static_cast<unsigned long long>(*length - stream.body().size()));
        return false;
    }
    // The whole response is already here (the common case for a small page):
    // send it with a length, which saves the chunk framing and keeps HTTP/1.0
    // keep-alive clients connected. HEAD is left alone: its length would be 0.
    if (!length && stream.ended() && !request.is_head()) length = stream.body().size();

    Response& response = exchange.response;
    response.reset();
    begin_head(status, keep_alive_, response);
    ResponseHead& out_head = response.head;
    for (const Header& header : head.headers)
        if (!is_backend_own_field(header.name)) out_head.add(header.name, header.value);
    exchange.stream_fields.for_each(
        [&](std::string_view name, std::string_view value) { out_head.add(name, value); });
    if (length) {
        out_.has_length = true;
        out_.left = *length;
        if (status != 204 && status != 304) out_head.content_length = *length;
    } else if (!no_body) {
        if (request.version_minor >= 1) {
            out_head.add("Transfer-Encoding", "chunked");
            out_.chunked = true;
        } else {
            keep_alive_ = false; // RFC 9112 §6.3: the body ends when the connection closes
        }
    }
    write_http1_head(out_head, context_.clock.now_s, keep_alive_, request.version_minor, s.out);
    s.out_sent = 0;
    out_.status = status;
    out_.no_body = no_body;
    out_.head_size = s.out.size();
    out_.head_built = true;
    return true;
}

Http1Engine::Step Http1Engine::relay_stream() {
    ResponseStream& stream = *state_->exchange.stream;
    const Request& request = *state_->exchange.request;
    for (;;) {
        if (!frame_stream_body()) {
            log_error("the backend's response to \"%.*s\" ended %llu bytes short of its "
                      "Content-Length: closing the client connection",
                      int(request.target.size()), request.target.data(),
                      static_cast<unsigned long long>(out_.left));
            return Step::Close;
        }
        Step step = write_out();
        if (step != Step::Continue) return step;
        if (out_.finished) break;
        if (stream.body().empty()) {
            // Reading resumed by consume() may have met a failure.
            StreamState state = stream.poll();
            if (stream_stopped(state)) return stream_failed(state);
            if (stream.body().empty() && !stream.ended()) return Step::Wait;
        }
    }
    return finish_response(out_.status, out_.body_bytes_sent());
}

// Moves body bytes from the stream into the out buffer (framed), within the
// bound. False when the response ended short of its Content-Length.
bool Http1Engine::frame_stream_body() {
    Http1RequestState& s = *state_;
    ResponseStream& stream = *s.exchange.stream;
    for (std::span<const char> data = stream.body(); !data.empty(); data = stream.body()) {
        if (s.out.size() - s.out_sent >= kStreamOutHighWater) return true;
        if (s.out_sent > 0) {
            s.out.erase(0, s.out_sent);
            s.out_sent = 0;
        }
        size_t take = std::min(data.size(), kStreamOutHighWater);
        size_t keep = out_.no_body ? 0 : take;
        if (out_.has_length && keep > out_.left) {
            const Request& request = *s.exchange.request;
            log_warn("the backend's response to \"%.*s\" is longer than its Content-Length: "
                     "extra bytes dropped",
                     int(request.target.size()), request.target.data());
            keep = size_t(out_.left);
        }
        if (out_.has_length) out_.left -= keep;
        if (keep > 0) {
            if (out_.chunked) {
                append_hex(keep, s.out);
                s.out.append("\r\n");
            }
            s.out.append(data.data(), keep);
            if (out_.chunked) s.out.append("\r\n");
        }
        stream.consume(take);
    }
    if (stream.ended() && stream.body().empty() && !out_.finished) {
        if (out_.has_length && out_.left > 0 && !out_.no_body) return false;
        if (out_.chunked) s.out.append("0\r\n\r\n"); // RFC 9112 §7.1: the last chunk
        out_.finished = true;
    }
    return true;
}

// The 101 of an upgrade the client asked for and the backend accepted: its
// Upgrade field stays (RFC 9110 §7.8), the connection becomes a tunnel.
void Http1Engine::build_tunnel_head() {
    Http1RequestState& s = *state_;
    Exchange& exchange = s.exchange;
    const StreamHead& head = exchange.stream->head();
    exchange.response.reset();
    s.out.clear();
    append_status_line(101, s.out);
    append_common_headers(context_.clock.now_s, s.out);
    for (const Header& header : head.headers) {
        if (is_backend_own_field(header.name) && !ascii_iequals(header.name, "Upgrade")) continue;
        s.out.append(header.name).append(": ").append(header.value).append("\r\n");
    }
    exchange.stream_fields.append_http1_fields(s.out);
    s.out.append("Connection: upgrade\r\n\r\n");
    s.out_sent = 0;
    out_.status = 101;
    out_.head_size = s.out.size();
    out_.head_built = true;
    keep_alive_ = false; // what follows is not HTTP any more
    set_phase(Phase::Tunnel);
}

// The tunnel: the backend's bytes to the client (at most kStreamOutHighWater
// queued), the client's bytes (what follows the request head in the input
// buffer) offered to the stream, each way with back-pressure, until either
// side closes or fails. Accounted as 101 with the bytes relayed when it ends.
Http1Engine::Step Http1Engine::tunnel() {
    Http1RequestState& s = *state_;
    ResponseStream& stream = *s.exchange.stream;
    for (;;) {
        Step step = write_out();
        if (step != Step::Continue) return step;
        if (std::span<const char> data = stream.body(); !data.empty()) {
            size_t take = std::min(data.size(), kStreamOutHighWater);
            s.out.append(data.data(), take);
            stream.consume(take);
            continue;
        }
        size_t begin = s.input_begin + head_size_;
        size_t waiting = s.input_end - begin;
        if (waiting > 0) {
            size_t taken = stream.offer_body({s.input.data() + begin, waiting});
            std::memmove(s.input.data() + begin, s.input.data() + begin + taken, waiting - taken);
            s.input_end -= taken;
            waiting -= taken;
        }
        StreamState state = stream.poll(); // sends what was offered
        if (stream_stopped(state)) return Step::Close;
        if (!stream.body().empty()) continue;
        if (stream.ended() || peer_closed_) return Step::Close;
        if (waiting > 0) return Step::Wait; // the stream is full: its progress brings us back
        if (!readable_) return Step::Wait;
        step = fill_input();
        if (step != Step::Continue) return step;
    }
}

Http1Engine::Step Http1Engine::write_out() {
    Http1RequestState& s = *state_;
    while (s.out_sent < s.out.size()) {
        if (bytes_this_pass_ >= kMaxBytesPerPass) return Step::Yield;
        iovec iov{s.out.data() + s.out_sent, s.out.size() - s.out_sent};
        ssize_t n = transport_.writev(&iov, 1, false);
        if (n < 0) return write_stalled(n);
        s.out_sent += size_t(n);
        out_.bytes_sent += uint64_t(n);
        bytes_this_pass_ += uint64_t(n);
    }
    write_blocked_ = false;
    s.out.clear();
    s.out_sent = 0;
    return Step::Continue;
}

} // namespace lepus
