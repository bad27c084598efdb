// The HTTP/1.1 part of a backend connection: the request written as
// HTTP/1.1, the response head parsed, its body de-framed. Sockets, timers and
// the pool are upstream::Connection's.
#include "proxy/upstream.h"

#include "http/response.h"

#include <algorithm>

namespace lepus::proxy {
namespace {

using upstream::Failure;

constexpr upstream::ProtocolNames kNames{"proxy", "--proxy-timeout", "--proxy-connect-timeout"};

} // namespace

BackendPool::BackendPool(Reactor& reactor, BackendOptions options, UpstreamGauges* gauges)
    : Pool(reactor, std::move(options), gauges, kNames) {}

std::unique_ptr<upstream::Connection> BackendPool::make_connection() {
    return std::make_unique<BackendConnection>(*this, reactor());
}

BackendConnection::BackendConnection(upstream::Pool& pool, Reactor& reactor)
    : Connection(pool, reactor), head_(pool.options().head_max) {}

void BackendConnection::reset_response() {
    head_.reset();
    chunks_.reset();
    framing_ = BodyFraming::None;
    left_ = 0;
}

void BackendConnection::begin_request(std::string_view head, bool head_request, bool replayable,
                                      bool upgrade, bool chunked) {
    begin(replayable);
    wbuf_.assign(head);
    head_request_ = head_request;
    upgrade_ = upgrade;
    chunked_ = chunked;
}

void BackendConnection::append_body(std::span<const char> data) {
    if (data.empty()) return;
    bool chunk = chunked_ && !tunnel(); // a tunnel carries the client's bytes as they are
    reserve_append(data.size() + (chunk ? 20 : 0));
    if (chunk) {
        append_hex(data.size(), wbuf_);
        wbuf_.append("\r\n");
    }
    wbuf_.append(data.data(), data.size());
    if (chunk) wbuf_.append("\r\n");
}

void BackendConnection::end_body() {
    if (request_done_) return;
    if (chunked_) wbuf_.append("0\r\n\r\n"); // RFC 9112 §7.1: the last chunk, no trailers
    request_done_ = true;
}

// One step (the head, an interim response, a run of body bytes): the pool
// checks back-pressure between steps.
void BackendConnection::process_input() {
    std::span<const char> input{rbuf_.get() + rpos_, rend_ - rpos_};
    size_t used = 0;
    if (head_done_) {
        if (!take_body(input, used)) return;
        rpos_ += used;
    } else {
        ResponseHead::Status status = head_.feed(input, used);
        rpos_ += used;
        if (status == ResponseHead::Status::Error) {
            std::string reason = "bad response head: ";
            reason.append(head_.error());
            return fail(Failure::Protocol, reason.c_str());
        }
        if (status == ResponseHead::Status::Again) return;
        int code = head_.status();
        if (code >= 100 && code < 200 && code != 101) {
            // An interim response (100 Continue, 103 Early Hints): lepus
            // answered the client's Expect itself; the final one follows.
            head_.reset();
            return;
        }
        head_done_ = true;
        framing_ = head_.framing(head_request_);
        // RFC 9110 §15.2.2: after a 101 the connection speaks the new
        // protocol; only a request that asked for it may get one (else
        // the engine answers 502). Never reused either way.
        if (code == 101) framing_ = upgrade_ ? BodyFraming::Tunnel : BodyFraming::None;
        if (!head_.keep_alive() || code == 101) reusable_ = false;
        // A tunnel may stay silent for as long as its client does: it
        // leaves the pool, which may open another connection for requests.
        if (tunnel() && state_ == State::Active && client_) become_tunnel();
        if (framing_ == BodyFraming::Length) left_ = *head_.content_length();
        if (framing_ == BodyFraming::None || (framing_ == BodyFraming::Length && left_ == 0))
            ended_ = true;
    }
    // Bytes after the end of the response: the backend is confused, or the
    // connection is not safe to reuse (RFC 9112 §9.3.2).
    if (ended_ && rpos_ < rend_) reusable_ = false;
}

// An active health check: GET `path`, Host the backend's address.
void BackendConnection::write_probe(std::string_view path, std::string_view) {
    const std::string& address = this->address().text;
    std::string head = "GET ";
    head.append(path).append(" HTTP/1.1\r\nHost: ");
    head.append(address.starts_with("unix:") ? std::string_view("localhost")
                                             : std::string_view(address));
    head.append("\r\nUser-Agent: lepus health check\r\nConnection: close\r\n\r\n");
    begin_request(head, false, false);
    end_body();
}

// De-frames body bytes of `data` into body_; false after a failure.
bool BackendConnection::take_body(std::span<const char> data, size_t& used) {
    switch (framing_) {
    case BodyFraming::None:
        used = 0;
        ended_ = true;
        return true;
    case BodyFraming::Length: {
        used = size_t(std::min<uint64_t>(left_, data.size()));
        body_.append(data.data(), used);
        left_ -= used;
        if (left_ == 0) ended_ = true;
        return true;
    }
    case BodyFraming::Chunked: {
        ChunkedDecoder::Status status = chunks_.feed(data, used, body_);
        if (status == ChunkedDecoder::Status::Error) {
            std::string reason = "bad chunked body: ";
            reason.append(chunks_.error_reason());
            fail(Failure::Protocol, reason.c_str());
            return false;
        }
        if (status == ChunkedDecoder::Status::Done) ended_ = true;
        return true;
    }
    case BodyFraming::Close:
    case BodyFraming::Tunnel:
        used = data.size();
        body_.append(data.data(), data.size());
        return true;
    }
    return true;
}

} // namespace lepus::proxy
