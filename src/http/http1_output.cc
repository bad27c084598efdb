// The HTTP/1.1 engine's output for complete answers: 100 Continue, a
// Response's head, memory body and file range (writev, then sendfile from the
// saved offset across EAGAIN), the end of an exchange (keepalive or close) and
// the lingering close. Streamed answers are framed in http1_stream.cc; reading
// and parsing are in http1_engine.cc.

#include "http/http1_engine.h"
#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace lepus {

// "HTTP/1.1 100 Continue", written like any other output: a partial write is
// finished before anything else goes out.
Http1Engine::Step Http1Engine::send_continue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    while (continue_sent_ < kContinue.size()) {
        iovec iov{const_cast<char*>(kContinue.data()) + continue_sent_,
                  kContinue.size() - continue_sent_};
        ssize_t n = transport_.writev(&iov, 1, false);
        if (n == kIoAgain) {
            write_blocked_ = true;
            return Step::Wait;
        }
        if (n < 0) return Step::Close;
        continue_sent_ += size_t(n);
    }
    write_blocked_ = false;
    continue_wanted_ = false;
    return Step::Continue;
}

Http1Engine::Step Http1Engine::write_response() {
    if (continue_wanted_ && continue_sent_ > 0) { // a partial 100 Continue goes first
        Step step = send_continue();
        if (step != Step::Continue) return step;
    }
    Response& response = state_->exchange.response;
    if (response.body_file_fd >= 0 && body_sent_ == 0 && response.file_length == 0 &&
        response.body.size() >= kSendfileFrom && transport_.zero_copy_files()) {
        // A cached file's bytes, large enough: from the file by sendfile
        // rather than copied from memory into the socket, as lighttpd and
        // nginx send them. Measured on loopback against the copy: 32 KiB
        // bodies about 1.08x in req/s, 64 KiB 1.17x per core, 100 KiB level,
        // 8 KiB level (docs/BENCHMARKS.md, issue 15).
        response.file_fd = std::exchange(response.body_file_fd, -1);
        response.file_offset = response.body_file_offset;
        response.file_length = response.body.size();
        response.body = {};
    }
    const std::string& head = state_->out; // written by start_writing
    while (head_sent_ < head.size() || body_sent_ < response.body.size()) {
        iovec iov[2] = {
            {const_cast<char*>(head.data()) + head_sent_, head.size() - head_sent_},
            {const_cast<char*>(response.body.data()) + body_sent_,
             response.body.size() - body_sent_},
        };
        bool skip_head = iov[0].iov_len == 0;
        // MSG_MORE: let the head share a segment with the first file bytes;
        // and on a connection that closes after this response, let the FIN
        // ride on its last segment: one packet fewer per connection, and the
        // client wakes once for the answer and the end (HTTP/1.0 `ab`).
        bool more = response.file_length > 0 || closes_after_response();
        ssize_t n = transport_.writev(iov + skip_head, skip_head ? 1 : 2, more);
        if (n < 0) return write_stalled(n);
        auto sent = size_t(n);
        size_t to_head = std::min(sent, head.size() - head_sent_);
        head_sent_ += to_head;
        body_sent_ += sent - to_head;
        bytes_this_pass_ += sent;
    }
    while (response.file_length > 0) {
        if (bytes_this_pass_ >= kMaxBytesPerPass) return Step::Yield;
        auto chunk = size_t(std::min<uint64_t>(response.file_length, kMaxBytesPerPass));
        ssize_t n = transport_.send_file(response.file_fd, response.file_offset, chunk);
        if (n == kIoAgain) {
            write_blocked_ = true;
            return Step::Wait;
        }
        if (n < 0) {
            if (!is_disconnect(errno))
                log_error("sendfile to %s: %s", info_.peer.to_string().c_str(), strerror(errno));
            return Step::Close;
        }
        if (n == 0) {
            // The file shrank under us: what was promised cannot be sent.
            log_error("sendfile: file shrank while being sent to %s (%llu bytes missing)",
                      info_.peer.to_string().c_str(),
                      static_cast<unsigned long long>(response.file_length));
            return Step::Close;
        }
        response.file_offset += uint64_t(n);
        response.file_length -= uint64_t(n);
        body_sent_ += size_t(n);
        bytes_this_pass_ += uint64_t(n);
    }
    write_blocked_ = false;
    return finish_response(response.head.status, body_sent_);
}

// A write that did not go through: wait for room (the write edge brings us
// back), or close a connection that is broken (a vanished peer quietly).
Http1Engine::Step Http1Engine::write_stalled(ssize_t result) {
    if (result == kIoAgain) {
        write_blocked_ = true;
        return Step::Wait;
    }
    if (!is_disconnect(errno))
        log_info("send to %s: %s", info_.peer.to_string().c_str(), strerror(errno));
    return Step::Close;
}

void Http1Engine::end_exchange() {
    Exchange& exchange = state_->exchange;
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    in_exchange_ = false;
    context_.handler.finish(exchange);
    exchange.request = nullptr;
}

// The response is out: log it, then the next request, or a (lingering) close.
Http1Engine::Step Http1Engine::finish_response(int status, uint64_t body_bytes) {
    Http1RequestState& s = *state_;
    if (!accounted_) account(status, body_bytes);
    end_exchange();
    s.exchange.response.reset(); // releases the cached file
    s.input_begin += head_size_;
    s.parser.reset();
    head_size_ = 0;
    if (!body_done_) keep_alive_ = false; // answered before the body was all read
    if (closes_after_response()) {
        bool unread = s.input_end > s.input_begin || readable_;
        if (!error_response_ && !unread) return Step::Close;
        // Closing with unread input makes the kernel send RST, which can destroy
        // the response before the client reads it: shut down our side and drain
        // for a while first (nginx's lingering close).
        transport_.shutdown_write();
        set_phase(Phase::Lingering);
        deadline_ = context_.clock.now_ms + context_.options.linger_ms;
        return Step::Continue;
    }
    if (s.input_begin == s.input_end) {
        s.input_begin = s.input_end = 0;
        set_phase(Phase::Idle);
    } else {
        // Bytes of the next request are here: its header deadline starts now,
        // not after a keepalive wait.
        set_phase(Phase::ReadingHead);
        deadline_ = context_.clock.now_ms + context_.options.header_timeout_ms;
    }
    return Step::Continue;
}

Http1Engine::Step Http1Engine::linger() {
    ssize_t drained = drain_input(transport_, kMaxBytesPerPass);
    if (drained == kIoAgain) return Step::Wait;
    return drained == 0 ? Step::Close : Step::Yield;
}

} // namespace lepus
