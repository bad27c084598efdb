// BackendConnection: one connection to an HTTP backend, from connect to
// release: the request written out, the response head parsed and its body
// de-framed, retries of a dead pooled connection, draining, timeouts. The
// pool around it (BackendPool) is in backend_pool.cc.
#include "proxy/upstream.h"

#include "http/response.h"
#include "log/error_log.h"
#include "log/log_escape.h"
#include "net/transport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus::proxy {
namespace {

// How long a backend that refused a connection is skipped (nginx's
// fail_timeout=10s with max_fails=1).
constexpr uint64_t kDownMs = 10000;

} // namespace

// --- BackendConnection -------------------------------------------------------

BackendConnection::BackendConnection(BackendPool& pool, Reactor& reactor)
    : pool_(pool), reactor_(reactor), timer_(this, &BackendConnection::on_timer),
      head_(pool.options().head_max) {}

BackendConnection::~BackendConnection() {
    fd_.reset(); // never touch the reactor here (see fastcgi::UpstreamConnection)
}

const BackendAddress& BackendConnection::address() const {
    return pool_.options().address;
}

void BackendConnection::attach(BackendClient& client) {
    client_ = &client;
    client.backend_ = this;
    reused_ = state_ == State::Idle;
    if (state_ == State::Idle) state_ = State::Active;
    wbuf_.clear();
    wsent_ = 0;
    rpos_ = rend_ = 0;
    head_.reset();
    chunks_.reset();
    framing_ = BodyFraming::None;
    left_ = 0;
    body_.clear();
    body_pos_ = 0;
    failure_ = BackendFailure::None;
    head_done_ = ended_ = body_done_ = paused_ = received_ = retried_ = false;
    head_request_ = replayable_ = upgrade_ = false;
    reusable_ = true;
    if (state_ == State::Closed) connect_socket();
    if (failure_ != BackendFailure::None) return;
    arm_timer(state_ == State::Connecting ? pool_.options().connect_timeout_ms
                                          : pool_.options().response_timeout_ms);
}

void BackendConnection::connect_socket() {
    const BackendAddress& address = this->address();
    fd_.reset(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_) return fail(BackendFailure::Connect, strerror(errno));
    if (address.family() != AF_UNIX) {
        int one = 1;
        setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc =
        ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    if (rc != 0 && errno != EINPROGRESS) {
        int error = errno;
        fd_.reset();
        return fail(BackendFailure::Connect, strerror(error));
    }
    if (!reactor_.add(fd_.get(), this, EPOLLIN | EPOLLOUT | EPOLLRDHUP, false)) {
        fd_.reset();
        return fail(BackendFailure::Connect, "cannot register the socket");
    }
    state_ = rc == 0 ? State::Active : State::Connecting;
    readable_ = false;
}

void BackendConnection::close_socket() {
    if (fd_) {
        reactor_.remove(fd_.get());
        fd_.reset();
    }
    reactor_.timers().cancel(timer_);
}

void BackendConnection::begin_request(std::string_view head, bool head_request, bool replayable,
                                      bool upgrade) {
    wbuf_.assign(head);
    wsent_ = 0;
    head_request_ = head_request;
    replayable_ = replayable;
    upgrade_ = upgrade;
}

void BackendConnection::append_body(std::span<const char> data, bool chunked) {
    if (data.empty()) return;
    if (replayable_ && wbuf_.size() + data.size() > kSendHighWater) {
        // Too much to keep for a replay: a dead pooled connection is then
        // reported instead of replaced.
        replayable_ = false;
        wbuf_.erase(0, wsent_);
        wsent_ = 0;
    }
    if (chunked) {
        append_hex(data.size(), wbuf_);
        wbuf_.append("\r\n");
    }
    wbuf_.append(data.data(), data.size());
    if (chunked) wbuf_.append("\r\n");
}

void BackendConnection::end_body(bool chunked) {
    if (body_done_) return;
    if (chunked) wbuf_.append("0\r\n\r\n"); // RFC 9112 §7.1: the last chunk, no trailers
    body_done_ = true;
}

void BackendConnection::flush() {
    if (state_ != State::Active && state_ != State::Draining) return;
    while (wsent_ < wbuf_.size()) {
        ssize_t n = ::send(fd_.get(), wbuf_.data() + wsent_, wbuf_.size() - wsent_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return;
            return on_io_error(errno, "send");
        }
        wsent_ += size_t(n);
    }
    if (!replayable_) {
        wbuf_.clear();
        wsent_ = 0;
    }
}

void BackendConnection::consume_body(size_t n) {
    body_pos_ += n;
    if (body_pos_ == body_.size()) body_.clear(), body_pos_ = 0;
    if (paused_ && body_.size() - body_pos_ < kBodyHighWater / 2) {
        paused_ = false;
        if (body_pos_ > 0) body_.erase(0, body_pos_), body_pos_ = 0;
        arm_response_timer();
        read_available(); // what waited in the socket raises no new edge
    }
}

void BackendConnection::on_events(uint32_t events) {
    if (state_ == State::Connecting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
            close_socket();
            fail(BackendFailure::Connect, strerror(error));
            return notify();
        }
        state_ = State::Active;
        arm_response_timer();
    }
    if (state_ == State::Idle) {
        // An idle connection has nothing to say: the backend closing it (its
        // keepalive timeout) or garbage. Either way it is done.
        if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
        char byte;
        if (!(events & (EPOLLHUP | EPOLLERR)) &&
            recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN)
            return;
        close_socket();
        state_ = State::Closed;
        pool_.on_idle_closed(*this);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readable_ = true;
    flush();
    read_available();
    if (state_ == State::Draining) return finish_draining();
    notify();
}

void BackendConnection::read_available() {
    while (fd_ && !paused_ && !ended_ && failure_ == BackendFailure::None) {
        if (rpos_ < rend_) {
            process_input();
            continue;
        }
        if (!readable_) return;
        if (!rbuf_) rbuf_ = std::make_unique<char[]>(kReadBufferSize);
        ssize_t n = ::read(fd_.get(), rbuf_.get(), kReadBufferSize);
        if (n > 0) {
            rpos_ = 0;
            rend_ = size_t(n);
            received_ = true;
            if (replayable_) {
                replayable_ = false;
                if (wsent_ == wbuf_.size()) wbuf_.clear(), wsent_ = 0;
            }
            arm_response_timer();
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            readable_ = false;
            return;
        }
        if (n == 0 && head_done_ &&
            (framing_ == BodyFraming::Close || framing_ == BodyFraming::Tunnel)) {
            // RFC 9112 §6.3 8: the close is the end of this body.
            ended_ = true;
            reusable_ = false;
            close_socket();
            return;
        }
        return on_io_error(n == 0 ? ECONNRESET : errno, n == 0 ? "closed" : "read");
    }
}

void BackendConnection::process_input() {
    while (rpos_ < rend_ && !paused_ && !ended_ && failure_ == BackendFailure::None) {
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
                return fail(BackendFailure::Protocol, reason.c_str());
            }
            if (status == ResponseHead::Status::Again) return;
            int code = head_.status();
            if (code >= 100 && code < 200 && code != 101) {
                // An interim response (100 Continue, 103 Early Hints): lepus
                // answered the client's Expect itself; the final one follows.
                head_.reset();
                continue;
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
            if (tunnel() && state_ == State::Active && client_) pool_.on_tunnel(*this);
            if (framing_ == BodyFraming::Length) left_ = *head_.content_length();
            if (framing_ == BodyFraming::None || (framing_ == BodyFraming::Length && left_ == 0))
                ended_ = true;
        }
        if (state_ == State::Draining) {
            body_.clear();
            body_pos_ = 0;
        } else if (body_.size() - body_pos_ >= kBodyHighWater) {
            // The client is slower than the backend: stop reading (TCP pushes
            // back on the backend) and stop its clock.
            paused_ = true;
        }
    }
    // Bytes after the end of the response: the backend is confused, or the
    // connection is not safe to reuse (RFC 9112 §9.3.2).
    if (ended_ && rpos_ < rend_) reusable_ = false;
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
            fail(BackendFailure::Protocol, reason.c_str());
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

bool BackendConnection::can_retry() const {
    return reused_ && !retried_ && !received_ && replayable_ && state_ == State::Active;
}

void BackendConnection::on_io_error(int error, const char* what) {
    // A pooled connection the backend closed while idle (the keepalive race):
    // once, on a new one, for an idempotent request only.
    if (is_disconnect(error) && can_retry()) return retry();
    if (ended_) {
        reusable_ = false;
        close_socket();
        return;
    }
    std::string reason = std::string(what) + ": " +
                         (error == ECONNRESET && std::strcmp(what, "closed") == 0
                              ? "connection closed by the backend"
                              : strerror(error));
    fail(BackendFailure::Closed, reason.c_str());
}

void BackendConnection::retry() {
    log_info("proxy %s: pooled connection was closed by the backend, retrying on a new one",
             address().text.c_str());
    close_socket();
    retried_ = true;
    wsent_ = 0;
    rpos_ = rend_ = 0;
    head_.reset();
    connect_socket();
    if (failure_ != BackendFailure::None) return;
    arm_timer(state_ == State::Connecting ? pool_.options().connect_timeout_ms
                                          : pool_.options().response_timeout_ms);
    flush();
}

void BackendConnection::fail(BackendFailure failure, const char* reason) {
    if (failure_ != BackendFailure::None) return;
    failure_ = failure;
    if (failure == BackendFailure::Connect) pool_.down_until_ms = reactor_.now_ms() + kDownMs;
    ScopedLogContext context(client_ ? client_->log_context : LogContext{});
    log_error("proxy %s: %s", address().text.c_str(), reason);
    close_socket();
    if (state_ == State::Draining) {
        state_ = State::Closed;
        pool_.on_available(*this);
    }
}

void BackendConnection::release() {
    BackendClient* client = client_;
    if (client) client->backend_ = nullptr;
    client_ = nullptr;
    if (detached_) {
        close_socket();
        state_ = State::Closed;
        return pool_.on_tunnel_closed(*this); // frees this
    }
    bool open = fd_ && failure_ == BackendFailure::None;
    bool sent = body_done_ && wsent_ == wbuf_.size();
    if (open && ended_ && reusable_ && sent && rpos_ == rend_ && body_pos_ == body_.size()) {
        state_ = State::Idle;
        arm_timer(pool_.options().idle_timeout_ms);
        pool_.on_available(*this);
        return;
    }
    if (open && !ended_ && sent && state_ == State::Active && framing_ != BodyFraming::Close &&
        reusable_) {
        // Drain and discard the rest of the response, then pool the
        // connection: a client that leaves must not cost a backend connection.
        state_ = State::Draining;
        body_.clear();
        body_pos_ = 0;
        paused_ = false;
        arm_response_timer();
        read_available();
        return finish_draining();
    }
    close_socket();
    state_ = State::Closed;
    pool_.on_available(*this);
}

void BackendConnection::finish_draining() {
    if (state_ != State::Draining) return;
    body_.clear();
    body_pos_ = 0;
    if (failure_ != BackendFailure::None) return; // fail() already gave the slot back
    if (!ended_) return;
    if (reusable_ && fd_ && rpos_ == rend_) {
        state_ = State::Idle;
        arm_timer(pool_.options().idle_timeout_ms);
    } else {
        close_socket();
        state_ = State::Closed;
    }
    pool_.on_available(*this);
}

void BackendConnection::arm_response_timer() {
    arm_timer(pool_.options().response_timeout_ms);
}

// The entry only ever moves earlier; when it fires before deadline_ it is
// re-scheduled (see fastcgi::UpstreamConnection::arm_timer).
void BackendConnection::arm_timer(uint64_t timeout_ms) {
    deadline_ = reactor_.now_ms() + timeout_ms;
    if (!timer_.scheduled() || timer_.deadline() > deadline_)
        reactor_.timers().schedule(timer_, deadline_);
}

void BackendConnection::notify() {
    if (client_) client_->on_backend_progress();
}

void BackendConnection::on_timer(TimerEntry& entry) {
    BackendConnection* self = &OwnedTimerEntry<BackendConnection>::owner_of(entry);
    Reactor& reactor = self->reactor_;
    if (reactor.now_ms() < self->deadline_) {
        reactor.timers().schedule(entry, self->deadline_);
        return;
    }
    switch (self->state_) {
    case State::Idle:
        self->close_socket();
        self->state_ = State::Closed;
        self->pool_.on_idle_closed(*self);
        return;
    case State::Draining:
        self->fail(BackendFailure::Timeout, "timed out while draining an abandoned response");
        return;
    case State::Connecting:
        self->pool_.down_until_ms = reactor.now_ms() + kDownMs;
        self->fail(BackendFailure::Timeout, "no connection within --proxy-connect-timeout");
        self->notify();
        return;
    case State::Active:
        // Waiting on the client (slow reader, or the response is complete):
        // not the backend's delay. consume_body() re-arms when reading resumes.
        // A tunnel's idleness is the client connection's to judge.
        if (self->ended_ || self->paused_ || self->tunnel()) return;
        self->fail(BackendFailure::Timeout, "no answer within --proxy-timeout");
        self->notify();
        return;
    case State::Closed:
        return;
    }
}

} // namespace lepus::proxy
