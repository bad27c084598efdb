#include "fastcgi/upstream.h"

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

namespace lepus::fastcgi {

// --- UpstreamConnection ------------------------------------------------------

UpstreamConnection::UpstreamConnection(UpstreamPool& pool, Reactor& reactor)
    : pool_(pool), reactor_(reactor), timer_(this, &UpstreamConnection::on_timer) {}

UpstreamConnection::~UpstreamConnection() {
    // The pool outlives its reactor's loop but not necessarily the reactor:
    // only give the fd back, never touch the reactor here.
    fd_.reset();
}

void UpstreamConnection::attach(UpstreamClient& client) {
    client_ = &client;
    client.upstream_ = this;
    reused_ = state_ == State::Idle;
    if (state_ == State::Idle) state_ = State::Active;
    wbuf_.clear();
    wsent_ = 0;
    rpos_ = rend_ = 0;
    decoder_.reset();
    parser_.reset();
    body_.clear();
    body_pos_ = 0;
    failure_ = UpstreamFailure::None;
    head_done_ = ended_ = stdin_done_ = paused_ = received_ = retried_ = false;
    replayable_ = true;
    reusable_ = true;
    if (state_ == State::Closed) connect_socket();
    if (failure_ == UpstreamFailure::None) arm_response_timer();
}

void UpstreamConnection::connect_socket() {
    const BackendAddress& address = pool_.options().address;
    fd_.reset(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_) return fail(UpstreamFailure::Connect, strerror(errno));
    if (address.family() != AF_UNIX) {
        int one = 1;
        setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc =
        ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    // A unix socket whose backlog is full answers EAGAIN: php-fpm is saturated
    // beyond its listen.backlog, which nginx too reports as a 502.
    if (rc != 0 && errno != EINPROGRESS) {
        int error = errno;
        fd_.reset();
        return fail(UpstreamFailure::Connect,
                    ("connect: " + describe_connect_error(address, error)).c_str());
    }
    if (!reactor_.add(fd_.get(), this, EPOLLIN | EPOLLOUT | EPOLLRDHUP, false)) {
        fd_.reset();
        return fail(UpstreamFailure::Connect, "cannot register the socket");
    }
    state_ = rc == 0 ? State::Active : State::Connecting;
    readable_ = false;
}

void UpstreamConnection::close_socket() {
    if (fd_) {
        reactor_.remove(fd_.get());
        fd_.reset();
    }
    reactor_.timers().cancel(timer_);
}

ParamsWriter& UpstreamConnection::begin_request(std::string_view script_name) {
    script_.assign(script_name);
    wbuf_.clear();
    wsent_ = 0;
    append_begin_request(wbuf_, kRequestId, Role::Responder, pool_.options().keep_alive);
    params_.begin(wbuf_, kRequestId);
    return params_;
}

void UpstreamConnection::append_stdin(std::span<const char> data) {
    if (replayable_ && wbuf_.size() + data.size() > kStdinHighWater) {
        // Too much to keep for a replay: a dead pooled connection is then
        // reported instead of replaced (it is almost always found at the first write).
        replayable_ = false;
        wbuf_.erase(0, wsent_);
        wsent_ = 0;
    }
    append_stream(wbuf_, RecordType::Stdin, kRequestId, data);
}

void UpstreamConnection::end_stdin() {
    append_stream_end(wbuf_, RecordType::Stdin, kRequestId);
    stdin_done_ = true;
}

void UpstreamConnection::flush() {
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

void UpstreamConnection::consume_body(size_t n) {
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

void UpstreamConnection::on_events(uint32_t events) {
    if (state_ == State::Connecting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
            close_socket();
            fail(UpstreamFailure::Connect,
                 ("connect: " + describe_connect_error(pool_.options().address, error)).c_str());
            return notify();
        }
        state_ = State::Active;
    }
    if (state_ == State::Idle) {
        // An idle connection has nothing to say: this is php-fpm closing it
        // (restart, pm.max_requests) or garbage. Either way it is done. An
        // edge left over from the last response (or EPOLLOUT) finds nothing.
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

void UpstreamConnection::read_available() {
    while (fd_ && !paused_ && !ended_ && failure_ == UpstreamFailure::None) {
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
        return on_io_error(n == 0 ? ECONNRESET : errno, n == 0 ? "closed" : "read");
    }
}

void UpstreamConnection::process_input() {
    while (rpos_ < rend_ && !paused_ && !ended_ && failure_ == UpstreamFailure::None) {
        size_t consumed = 0;
        DecodeStatus status = decoder_.feed({rbuf_.get() + rpos_, rend_ - rpos_}, consumed);
        rpos_ += consumed;
        if (status == DecodeStatus::Error) return fail(UpstreamFailure::Protocol, "bad record");
        if (status == DecodeStatus::Again) return;
        handle_record(decoder_.record());
        if (body_.size() - body_pos_ >= kBodyHighWater) {
            // The client is slower than php-fpm: stop reading (TCP or the unix
            // socket buffer then pushes back on php-fpm), and stop blaming
            // php-fpm's clock for the client's slowness.
            paused_ = true;
        }
    }
}

void UpstreamConnection::handle_record(const Record& record) {
    if (record.request_id != kRequestId)
        return fail(UpstreamFailure::Protocol, "record for an unknown request id");
    switch (record.type) {
    case RecordType::Stdout: {
        std::span<const char> data = record.content;
        if (data.empty() || state_ == State::Draining) return;
        if (!head_done_) {
            size_t consumed = 0;
            CgiParseStatus status = parser_.feed(data, consumed);
            if (status == CgiParseStatus::Error) return fail_bad_head();
            if (status == CgiParseStatus::Again) return;
            head_done_ = true;
            data = data.subspan(consumed);
        }
        body_.append(data.data(), data.size());
        return;
    }
    case RecordType::Stderr:
        return log_stderr({record.content.data(), record.content.size()});
    case RecordType::EndRequest: {
        auto end = parse_end_request(record.content);
        if (!end) return fail(UpstreamFailure::Protocol, "bad END_REQUEST");
        if (end->protocol_status != ProtocolStatus::RequestComplete)
            return fail(UpstreamFailure::Overloaded, "request refused (protocolStatus != 0)");
        if (!head_done_ && state_ != State::Draining)
            return fail(UpstreamFailure::Protocol, "response without a complete header block");
        ended_ = true;
        // §5.1 KEEP_CONN: the connection is ours again, provided nothing follows.
        reusable_ = pool_.options().keep_alive && rpos_ == rend_ && decoder_.at_record_boundary() &&
                    wsent_ == wbuf_.size();
        // Without it the response is all in body_: close now. php-fpm's child,
        // after END_REQUEST, shuts its side and reads until our close
        // (fcgi_close() in main/fastcgi.c): waiting for a slow client here would
        // keep that child from the next request.
        if (!pool_.options().keep_alive) close_socket();
        return;
    }
    default:
        return fail(UpstreamFailure::Protocol, "unexpected record type");
    }
}

// One error-log line per line of the script's stderr. The bytes are the script's
// (and so often a client's: a logged header, a form field): a raw newline or ESC
// would forge log lines or drive the terminal that shows the log (issue 14), so
// they are escaped as the access log escapes. A line split across two records is
// logged as two lines; php-fpm sends whole lines in practice.
void UpstreamConnection::log_stderr(std::string_view text) {
    if (!log_enabled(LogLevel::Warn)) return;
    ScopedLogContext context(client_ ? client_->log_context : LogContext{});
    std::string script = escaped_script(), escaped;
    while (!text.empty()) {
        size_t newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        escaped.clear();
        append_log_escaped(line, escaped);
        log_warn("FastCGI stderr from \"%s\": %s", script.c_str(), escaped.c_str());
    }
}

// A header block that cannot be passed on (malformed, or a 1xx Status): one
// error-log line naming the script and the offending bytes, then 502 for the client.
void UpstreamConnection::fail_bad_head() {
    std::string reason = "bad CGI header block: ";
    reason.append(parser_.error());
    if (!parser_.error_value().empty()) {
        reason.append(" (\"");
        append_log_escaped(parser_.error_value(), reason);
        reason.append("\")");
    }
    fail(UpstreamFailure::Protocol, reason.c_str());
}

// The script name comes from the request path: escaped like everything else from outside.
std::string UpstreamConnection::escaped_script() const {
    std::string escaped;
    append_log_escaped(script_, escaped);
    return escaped;
}

// Only a connection taken from the idle pool: without keep_alive none ever is,
// so a fresh connection that breaks is reported (nothing raced with an idle close).
bool UpstreamConnection::can_retry() const {
    return reused_ && !retried_ && !received_ && replayable_ && state_ == State::Active;
}

void UpstreamConnection::on_io_error(int error, const char* what) {
    // A pooled connection php-fpm dropped while idle (the keepalive race): once, on a new one.
    if (is_disconnect(error) && can_retry()) return retry();
    if (ended_) {
        reusable_ = false; // closed after the end: fine, but not for reuse
        close_socket();
        return;
    }
    std::string reason =
        std::string(what) + ": " +
        (error == ECONNRESET && std::strcmp(what, "closed") == 0 ? "connection closed by php-fpm"
                                                                 : strerror(error));
    fail(UpstreamFailure::Closed, reason.c_str());
}

// A pooled connection that php-fpm closed while it sat idle (the close raced
// with our first write): open a fresh one and send the same bytes again. The
// request has produced nothing yet, so this is invisible to the client.
void UpstreamConnection::retry() {
    log_info("FastCGI %s: pooled connection was closed by the peer, reconnecting",
             pool_.options().address.text.c_str());
    close_socket();
    retried_ = true;
    wsent_ = 0;
    rpos_ = rend_ = 0;
    decoder_.reset();
    parser_.reset();
    connect_socket();
    if (failure_ != UpstreamFailure::None) return;
    arm_response_timer();
    flush();
}

void UpstreamConnection::fail(UpstreamFailure failure, const char* reason) {
    if (failure_ != UpstreamFailure::None) return;
    failure_ = failure;
    // The request's client, site and line, as nginx's "while connecting to upstream".
    ScopedLogContext context(client_ ? client_->log_context : LogContext{});
    log_error("FastCGI %s: %s%s%s%s", pool_.options().address.text.c_str(), reason,
              script_.empty() ? "" : " (script \"", escaped_script().c_str(),
              script_.empty() ? "" : "\")");
    close_socket();
    if (state_ == State::Draining) {
        state_ = State::Closed;
        pool_.on_available(*this);
    }
}

void UpstreamConnection::release() {
    UpstreamClient* client = client_;
    if (client) client->upstream_ = nullptr;
    client_ = nullptr;
    bool open = fd_ && failure_ == UpstreamFailure::None;
    // A script may answer before reading its whole body; the rest of our STDIN
    // would then reach php-fpm as garbage before the next request: not reusable.
    if (open && ended_ && reusable_ && stdin_done_ && body_pos_ == body_.size()) {
        state_ = State::Idle;
        arm_timer(pool_.options().idle_timeout_ms);
        pool_.on_available(*this);
        return;
    }
    if (open && !ended_ && stdin_done_ && state_ == State::Active) {
        // Drain and discard the rest of the response, then pool the connection.
        // (ABORT_REQUEST would be the protocol's way, but php-fpm ignores it.)
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

void UpstreamConnection::finish_draining() {
    if (state_ != State::Draining) return;
    body_.clear();
    body_pos_ = 0;
    if (failure_ != UpstreamFailure::None) return; // fail() already gave the slot back
    if (!ended_) return;
    if (reusable_ && fd_) {
        state_ = State::Idle;
        arm_timer(pool_.options().idle_timeout_ms);
    } else {
        close_socket();
        state_ = State::Closed;
    }
    pool_.on_available(*this);
}

void UpstreamConnection::arm_response_timer() {
    arm_timer(pool_.options().response_timeout_ms);
}

// The entry only ever moves earlier; when it fires before deadline_ it is
// re-scheduled. Idle and response timeouts alternate on every request, and
// moving the entry each time would re-arm the reactor's timerfd twice per request.
void UpstreamConnection::arm_timer(uint64_t timeout_ms) {
    deadline_ = reactor_.now_ms() + timeout_ms;
    if (!timer_.scheduled() || timer_.deadline() > deadline_)
        reactor_.timers().schedule(timer_, deadline_);
}

void UpstreamConnection::notify() {
    if (client_) client_->on_upstream_progress();
}

void UpstreamConnection::on_timer(TimerEntry& entry) {
    UpstreamConnection* self = &OwnedTimerEntry<UpstreamConnection>::owner_of(entry);
    Reactor& reactor = self->reactor_;
    if (reactor.now_ms() < self->deadline_) { // refresh() may fire a little early
        reactor.timers().schedule(entry, self->deadline_);
        return;
    }
    switch (self->state_) {
    case State::Idle:
        // Idle pooled connections pin php-fpm children (haproxy#2936): let them go.
        self->close_socket();
        self->state_ = State::Closed;
        self->pool_.on_idle_closed(*self);
        return;
    case State::Draining:
        self->fail(UpstreamFailure::Timeout, "timed out while draining an abandoned response");
        return;
    case State::Connecting:
    case State::Active:
        // Waiting on the client (slow reader, or the response is complete): not
        // php-fpm's delay. consume_body() re-arms when reading resumes.
        if (self->ended_ || self->paused_) return;
        self->fail(UpstreamFailure::Timeout, "no answer within --fastcgi-timeout");
        self->notify();
        return;
    case State::Closed:
        return;
    }
}

// --- UpstreamPool ------------------------------------------------------------

UpstreamPool::UpstreamPool(Reactor& reactor, UpstreamOptions options, UpstreamGauges* gauges)
    : reactor_(reactor), options_(std::move(options)), gauges_(gauges),
      queue_timer_(this, &UpstreamPool::on_queue_timer) {
    options_.connections = std::max<size_t>(1, options_.connections);
    for (size_t i = 0; i < options_.connections; ++i) {
        connections_.push_back(std::make_unique<UpstreamConnection>(*this, reactor_));
        closed_.push_back(connections_.back().get());
    }
}

UpstreamPool::~UpstreamPool() {
    // Unsigned wrap-around turns these additions into subtractions.
    add_to_gauges(-published_busy_, -published_idle_, -published_queued_);
}

void UpstreamPool::close_all() {
    for (auto& connection : connections_) {
        connection->close_socket();
        connection->state_ = UpstreamConnection::State::Closed;
    }
    idle_.clear();
    closed_.clear();
    for (auto& connection : connections_)
        closed_.push_back(connection.get());
    reactor_.timers().cancel(queue_timer_);
    publish_gauges();
}

void UpstreamPool::add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued) {
    if (!gauges_) return;
    auto add = [](std::atomic<uint64_t>& gauge, uint64_t delta) {
        gauge.store(gauge.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    };
    add(gauges_->busy, busy);
    add(gauges_->idle, idle);
    add(gauges_->queued, queued);
}

void UpstreamPool::publish_gauges() {
    uint64_t busy = busy_connections(), idle = idle_.size(), queued = queue_size_;
    add_to_gauges(busy - published_busy_, idle - published_idle_, queued - published_queued_);
    published_busy_ = busy;
    published_idle_ = idle;
    published_queued_ = queued;
}

void UpstreamPool::acquire(UpstreamClient& client) {
    client.refused_ = false;
    if (queue_size_ == 0) {
        // Warm connections first; a new socket only when none is idle.
        if (!idle_.empty()) {
            UpstreamConnection* connection = idle_.back();
            idle_.pop_back();
            publish_gauges();
            return connection->attach(client);
        }
        if (!closed_.empty()) {
            UpstreamConnection* connection = closed_.back();
            closed_.pop_back();
            publish_gauges();
            return connection->attach(client);
        }
    }
    if (queue_size_ >= options_.queue_limit) {
        client.refused_ = true;
        return;
    }
    client.queued_ = true;
    client.queue_deadline_ = reactor_.now_ms() + options_.queue_timeout_ms;
    client.queue_next_ = nullptr;
    client.queue_prev_ = queue_tail_;
    if (queue_tail_)
        queue_tail_->queue_next_ = &client;
    else
        queue_head_ = &client;
    queue_tail_ = &client;
    ++queue_size_;
    arm_queue_timer();
    publish_gauges();
}

void UpstreamPool::cancel_wait(UpstreamClient& client) {
    if (!client.queued_) return;
    if (client.queue_prev_)
        client.queue_prev_->queue_next_ = client.queue_next_;
    else
        queue_head_ = client.queue_next_;
    if (client.queue_next_)
        client.queue_next_->queue_prev_ = client.queue_prev_;
    else
        queue_tail_ = client.queue_prev_;
    client.queue_prev_ = client.queue_next_ = nullptr;
    client.queued_ = false;
    --queue_size_;
    arm_queue_timer();
    publish_gauges();
}

UpstreamClient* UpstreamPool::pop_waiter() {
    UpstreamClient* client = queue_head_;
    if (client) cancel_wait(*client);
    return client;
}

void UpstreamPool::on_available(UpstreamConnection& connection) {
    if (UpstreamClient* client = pop_waiter()) return assign(connection, *client);
    if (connection.state_ == UpstreamConnection::State::Idle)
        idle_.push_back(&connection);
    else
        closed_.push_back(&connection);
    publish_gauges();
}

void UpstreamPool::on_idle_closed(UpstreamConnection& connection) {
    auto it = std::find(idle_.begin(), idle_.end(), &connection);
    if (it != idle_.end()) idle_.erase(it);
    closed_.push_back(&connection);
    publish_gauges();
}

void UpstreamPool::assign(UpstreamConnection& connection, UpstreamClient& client) {
    connection.attach(client);
    client.on_upstream_progress();
}

void UpstreamPool::arm_queue_timer() {
    if (queue_head_)
        reactor_.timers().schedule(queue_timer_, queue_head_->queue_deadline_);
    else
        reactor_.timers().cancel(queue_timer_);
}

void UpstreamPool::on_queue_timer(TimerEntry& entry) {
    UpstreamPool* pool = &OwnedTimerEntry<UpstreamPool>::owner_of(entry);
    uint64_t now = pool->reactor_.now_ms();
    // Everyone shares one timeout, so the expired waiters are at the front.
    while (pool->queue_head_ && pool->queue_head_->queue_deadline_ <= now) {
        UpstreamClient* client = pool->pop_waiter();
        client->refused_ = true;
        client->on_upstream_progress(); // may close and free the client
    }
    pool->arm_queue_timer();
}

} // namespace lepus::fastcgi
