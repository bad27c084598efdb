// upstream::Connection: one connection to a backend, from connect to release:
// the request bytes written out, the response read and handed to the
// protocol's parser, back-pressure, the replay of a request on a pooled
// connection the backend had closed, draining, timeouts. The pool around it
// is in pool.cc.
#include "log/error_log.h"
#include "net/transport.h"
#include "upstream/pool.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus::upstream {

Connection::Connection(Pool& pool, Reactor& reactor)
    : pool_(pool), reactor_(reactor), timer_(this, &Connection::on_timer) {}

Connection::~Connection() {
    // The pool outlives its reactor's loop but not necessarily the reactor:
    // only give the fd back, never touch the reactor here.
    fd_.reset();
}

const BackendAddress& Connection::address() const {
    return pool_.options().address;
}

const ProtocolNames& Connection::names() const {
    return pool_.names();
}

void Connection::attach(Client& client) {
    // A connect a client that left had started: its deadline stands.
    bool connecting = state_ == State::Connecting;
    client_ = &client;
    client.connection_ = this;
    reused_ = state_ == State::Idle;
    if (state_ == State::Idle) state_ = State::Active;
    wbuf_.clear();
    wsent_ = 0;
    rpos_ = rend_ = 0;
    body_.clear();
    body_pos_ = 0;
    failure_ = Failure::None;
    head_done_ = ended_ = request_done_ = paused_ = received_ = retried_ = false;
    replayable_ = false;
    reusable_ = true;
    reset_response();
    if (state_ == State::Closed) connect_socket();
    if (failure_ != Failure::None || connecting) return;
    arm_timer(state_ == State::Connecting ? pool_.options().connect_timeout_ms
                                          : pool_.options().response_timeout_ms);
}

void Connection::connect_socket() {
    const BackendAddress& address = this->address();
    fd_.reset(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_) return fail(Failure::Connect, strerror(errno));
    if (address.family() != AF_UNIX) {
        int one = 1;
        setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc =
        ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    // A unix socket whose backlog is full answers EAGAIN: the backend is
    // saturated beyond its listen backlog, which nginx too reports as a 502.
    if (rc != 0 && errno != EINPROGRESS) {
        int error = errno;
        fd_.reset();
        return fail(Failure::Connect,
                    ("connect: " + describe_connect_error(address, error)).c_str());
    }
    if (!reactor_.add(fd_.get(), this, EPOLLIN | EPOLLOUT | EPOLLRDHUP, false)) {
        fd_.reset();
        return fail(Failure::Connect, "cannot register the socket");
    }
    state_ = rc == 0 ? State::Active : State::Connecting;
    readable_ = false;
}

void Connection::close_socket() {
    if (fd_) {
        reactor_.remove(fd_.get());
        fd_.reset();
    }
    reactor_.timers().cancel(timer_);
}

void Connection::begin(bool replayable) {
    wbuf_.clear();
    wsent_ = 0;
    replayable_ = replayable;
}

void Connection::begin_with(std::string bytes, bool replayable, bool complete) {
    wbuf_ = std::move(bytes);
    wsent_ = 0;
    replayable_ = replayable;
    request_done_ = complete;
}

void Connection::reserve_append(size_t n) {
    if (replayable_ && wbuf_.size() + n > kSendHighWater) {
        // Too much to keep for a replay: a dead pooled connection is then
        // reported instead of replaced (it is almost always found at the first write).
        replayable_ = false;
        wbuf_.erase(0, wsent_);
        wsent_ = 0;
    }
}

void Connection::flush() {
    if (!fd_ || (state_ != State::Active && state_ != State::Draining)) return;
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

void Connection::consume_body(size_t n) {
    body_pos_ += n;
    if (body_pos_ == body_.size()) body_.clear(), body_pos_ = 0;
    if (paused_ && body_.size() - body_pos_ < kBodyHighWater / 2) {
        paused_ = false;
        if (body_pos_ > 0) body_.erase(0, body_pos_), body_pos_ = 0;
        arm_response_timer();
        read_available(); // what waited in the socket raises no new edge
        // No notify: the client is the caller and looks again.
    }
}

void Connection::on_events(uint32_t events) {
    if (state_ == State::Connecting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
            close_socket();
            fail(Failure::Connect,
                 ("connect: " + describe_connect_error(address(), error)).c_str());
            if (!client_) return drop_spare();
            return notify();
        }
        state_ = State::Active;
        if (!client_) {
            // Connected for a client that left: idle until the next request
            // (closed at once when connections are not kept alive).
            if (!pool_.options().keep_alive) return drop_spare();
            state_ = State::Idle;
            arm_timer(pool_.options().idle_timeout_ms);
            return;
        }
        arm_response_timer();
    }
    if (state_ == State::Idle) {
        // An idle connection has nothing to say: this is the backend closing
        // it (its keepalive timeout, a restart, pm.max_requests) or garbage.
        // Either way it is done. An edge left over from the last response (or
        // EPOLLOUT) finds nothing.
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
    if (unsent()) flush();
    read_available();
    if (state_ == State::Draining) return finish_draining();
    notify();
}

void Connection::read_available() {
    while (fd_ && !paused_ && !ended_ && failure_ == Failure::None) {
        if (rpos_ < rend_) {
            process_input();
            if (state_ == State::Draining) {
                body_.clear();
                body_pos_ = 0;
            } else if (body_.size() - body_pos_ >= kBodyHighWater) {
                // The client is slower than the backend: stop reading (TCP or
                // the unix socket buffer then pushes back on the backend), and
                // stop blaming the backend's clock for the client's slowness.
                paused_ = true;
            }
            continue;
        }
        if (!readable_) return;
        if (!rbuf_) rbuf_ = std::make_unique<char[]>(kReadBufferSize);
        ssize_t n = ::read(fd_.get(), rbuf_.get(), kReadBufferSize);
        if (n > 0) {
            rpos_ = 0;
            rend_ = size_t(n);
            if (!received_ && !probe_) pool_.note_answer();
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
        if (n == 0 && head_done_ && ends_at_close()) {
            // RFC 9112 §6.3 8: the close is the end of this body.
            ended_ = true;
            reusable_ = false;
            close_socket();
            return;
        }
        return on_io_error(n == 0 ? ECONNRESET : errno, n == 0 ? "closed" : "read");
    }
}

// Only a connection taken from the idle pool: a fresh connection that breaks
// is reported (nothing raced with an idle close).
bool Connection::can_retry() const {
    return reused_ && !retried_ && !received_ && replayable_ && state_ == State::Active;
}

void Connection::on_io_error(int error, const char* what) {
    // A pooled connection the backend closed while idle (the keepalive race):
    // once, on a new one, for a replayable request only.
    if (is_disconnect(error) && can_retry()) return retry();
    if (ended_) {
        reusable_ = false; // closed after the end: fine, but not for reuse
        close_socket();
        return;
    }
    std::string reason = std::string(what) + ": " +
                         (error == ECONNRESET && std::strcmp(what, "closed") == 0
                              ? "connection closed by the backend"
                              : strerror(error));
    fail(Failure::Closed, reason.c_str());
}

// A pooled connection that the backend closed while it sat idle (the close
// raced with our first write): open a fresh one and send the same bytes again.
// The request has produced nothing yet, so this is invisible to the client.
void Connection::retry() {
    log_info("%s %s: pooled connection was closed by the backend, retrying on a new one",
             names().protocol, address().text.c_str());
    close_socket();
    retried_ = true;
    wsent_ = 0;
    rpos_ = rend_ = 0;
    reset_response();
    connect_socket();
    if (failure_ != Failure::None) return;
    arm_timer(state_ == State::Connecting ? pool_.options().connect_timeout_ms
                                          : pool_.options().response_timeout_ms);
    flush();
}

void Connection::fail(Failure failure, const char* reason) {
    if (failure_ != Failure::None) return;
    failure_ = failure;
    close_socket();
    // A failed health check is the check's to count and report (one line
    // when the backend goes out, not one per interval).
    if (probe_) return;
    ScopedLogContext context(client_ ? client_->log_context : LogContext{});
    log_error("%s %s: %s%s", names().protocol, address().text.c_str(), reason,
              log_context().c_str());
    // A backend that cannot be reached, or that closes before answering:
    // passive health counts it (not a bad answer or a slow one).
    if (failure == Failure::Connect || failure == Failure::ConnectTimeout ||
        (failure == Failure::Closed && !received_))
        pool_.note_failure(reason);
    if (state_ == State::Draining) {
        state_ = State::Closed;
        pool_.on_available(*this);
    }
}

void Connection::become_tunnel() {
    pool_.on_tunnel(*this);
}

void Connection::release() {
    Client* client = client_;
    if (client) client->connection_ = nullptr;
    client_ = nullptr;
    if (probe_) { // a health check's own connection: closed after each check
        close_socket();
        state_ = State::Closed;
        return;
    }
    if (detached_) {
        close_socket();
        state_ = State::Closed;
        return pool_.on_tunnel_closed(*this); // frees this
    }
    bool open = fd_ && failure_ == Failure::None;
    if (open && state_ == State::Connecting) {
        // The client left before the connect completed (an HTTP/2 stream
        // reset at once): the socket is kept for the next request, not closed
        // (issue 32: 4,600 reset streams had opened 3,562 connections).
        wbuf_.clear();
        wsent_ = 0;
        request_done_ = false;
        return pool_.on_available(*this);
    }
    bool sent = request_done_ && wsent_ == wbuf_.size();
    // A backend may answer before reading the whole request; the rest would
    // then reach it as garbage before the next request: not reusable.
    if (open && ended_ && reusable_ && sent && rpos_ == rend_ && body_pos_ == body_.size())
        return become_idle();
    if (open && !ended_ && request_done_ && state_ == State::Active && reusable_ && drainable()) {
        // Drain and discard the rest of the response, then pool the connection.
        // (FastCGI's ABORT_REQUEST would be the protocol's way, but php-fpm ignores it.)
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

// A spare connection (in the idle list, no client) whose connect failed or
// that is not to be kept: its slot becomes a closed one.
void Connection::drop_spare() {
    close_socket();
    state_ = State::Closed;
    pool_.on_idle_closed(*this);
}

void Connection::become_idle() {
    state_ = State::Idle;
    arm_timer(pool_.options().idle_timeout_ms);
    pool_.on_available(*this);
}

void Connection::finish_draining() {
    if (state_ != State::Draining) return;
    body_.clear();
    body_pos_ = 0;
    if (failure_ != Failure::None) return; // fail() already gave the slot back
    if (!ended_) return;
    if (reusable_ && fd_ && rpos_ == rend_) return become_idle();
    close_socket();
    state_ = State::Closed;
    pool_.on_available(*this);
}

void Connection::arm_response_timer() {
    arm_timer(pool_.options().response_timeout_ms);
}

// The entry only ever moves earlier; when it fires before deadline_ it is
// re-scheduled. Idle and response timeouts alternate on every request, and
// moving the entry each time would re-arm the reactor's timerfd twice per request.
void Connection::arm_timer(uint64_t timeout_ms) {
    deadline_ = reactor_.now_ms() + timeout_ms;
    if (!timer_.scheduled() || timer_.deadline() > deadline_)
        reactor_.timers().schedule(timer_, deadline_);
}

void Connection::notify() {
    if (client_) client_->on_upstream_progress();
}

void Connection::on_timer(TimerEntry& entry) {
    Connection* self = &OwnedTimerEntry<Connection>::owner_of(entry);
    Reactor& reactor = self->reactor_;
    if (reactor.now_ms() < self->deadline_) { // refresh() may fire a little early
        reactor.timers().schedule(entry, self->deadline_);
        return;
    }
    char reason[96];
    switch (self->state_) {
    case State::Idle:
        // Idle pooled connections pin backend workers (php-fpm children,
        // haproxy#2936): let them go.
        self->close_socket();
        self->state_ = State::Closed;
        self->pool_.on_idle_closed(*self);
        return;
    case State::Draining:
        self->fail(Failure::Timeout, "timed out while draining an abandoned response");
        return;
    case State::Connecting:
        std::snprintf(reason, sizeof reason, "no connection within %s",
                      self->names().connect_timeout_flag);
        self->fail(Failure::ConnectTimeout, reason);
        if (!self->client_) return self->drop_spare();
        self->notify();
        return;
    case State::Active:
        // Waiting on the client (slow reader, or the response is complete):
        // not the backend's delay. consume_body() re-arms when reading resumes.
        // A tunnel's idleness is the client connection's to judge.
        if (self->ended_ || self->paused_ || self->detached_) return;
        std::snprintf(reason, sizeof reason, "no answer within %s", self->names().timeout_flag);
        self->fail(Failure::Timeout, reason);
        self->notify();
        return;
    case State::Closed:
        return;
    }
}

} // namespace lepus::upstream
