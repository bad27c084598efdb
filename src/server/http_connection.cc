#include "server/http_connection.h"

#include "log/access_log.h"
#include "log/error_log.h"
#include "server/error_page.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

namespace lepus {
namespace {

constexpr size_t kInitialInput = 4096;
constexpr size_t kMinReadSpace = 1024;
constexpr uint64_t kLingerMs = 2000;

bool is_disconnect(int error) {
    return error == EPIPE || error == ECONNRESET || error == ENOTCONN || error == ETIMEDOUT;
}

std::string_view protocol_name(const Request& request) {
    return request.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
}

} // namespace

void HttpConnection::open(Worker& worker, const AcceptedSocket& socket) {
    auto* connection = new HttpConnection(worker, socket);
    if (!worker.reactor->add(socket.fd, connection, EPOLLIN | EPOLLOUT | EPOLLRDHUP, true)) {
        // The fd was counted by the acceptor; the reactor never saw it.
        delete connection;
        return;
    }
    // Most clients send the request right after connecting: try reading now
    // rather than waiting for the edge (TCP_DEFER_ACCEPT-like, without the option).
    connection->drive();
}

HttpConnection::HttpConnection(Worker& worker, const AcceptedSocket& socket)
    : worker_(worker), reactor_(*worker.reactor), fd_(socket.fd), peer_(socket.peer),
      timer_(this, &HttpConnection::on_timer) {}

void HttpConnection::on_events(uint32_t events) {
    if (events & (EPOLLERR | EPOLLHUP)) {
        close();
        return;
    }
    if (events & (EPOLLIN | kResumeEvent)) readable_ = true;
    if (events & EPOLLRDHUP) readable_ = rdhup_ = true;
    if (events & kResumeEvent) bytes_this_pass_ = 0, requests_this_pass_ = 0;
    // An EPOLLOUT edge alone only matters to a response that is waiting.
    if (!(events & (EPOLLIN | EPOLLRDHUP | kResumeEvent)) && phase_ != Phase::Writing &&
        !(phase_ == Phase::Upstream && proxy_blocked_))
        return;
    drive();
}

void HttpConnection::on_shutdown() {
    if (phase_ == Phase::Idle)
        close();
    else
        keep_alive_ = false;
}

void HttpConnection::on_force_close() {
    close();
}

void HttpConnection::on_upstream_progress() {
    if (in_drive_)
        upstream_progress_ = true; // drive() looks again before it waits
    else
        drive();
}

void HttpConnection::set_phase(Phase next) {
    auto gauge = [this](Phase phase) -> std::atomic<uint64_t>* {
        WorkerStats& stats = worker_.stats();
        if (phase == Phase::ReadingHead || phase == Phase::ReadingBody) return &stats.reading;
        if (phase == Phase::Writing || phase == Phase::Upstream) return &stats.writing;
        return nullptr;
    };
    std::atomic<uint64_t>* from = gauge(phase_);
    std::atomic<uint64_t>* to = gauge(next);
    if (from != to) {
        if (from) WorkerStats::drop(*from);
        if (to) WorkerStats::bump(*to);
    }
    phase_ = next;
}

void HttpConnection::drive() {
    if (in_drive_ || closed_) return;
    in_drive_ = true;
    bytes_this_pass_ = 0;
    requests_this_pass_ = 0;
    Step step = Step::Continue;
    for (;;) {
        while (step == Step::Continue) {
            switch (phase_) {
            case Phase::Idle:
            case Phase::ReadingHead:
                step = read_head();
                break;
            case Phase::ReadingBody:
                step = read_body();
                break;
            case Phase::Writing:
                step = write_response();
                break;
            case Phase::Lingering:
                step = linger();
                break;
            case Phase::Upstream:
                step = proxy();
                break;
            }
        }
        // The backend reported progress while we were busy: look again.
        if (step != Step::Wait || !upstream_progress_ || closed_) break;
        upstream_progress_ = false;
        step = Step::Continue;
    }
    in_drive_ = false;
    if (closed_)
        delete this; // closed from inside a step
    else if (step == Step::Close)
        close();
    else if (step == Step::Yield)
        reactor_.defer(fd_.get());
    else
        wait_with_timer();
}

// Arms the one timer for what the connection now waits on.
void HttpConnection::wait_with_timer() {
    const ServerOptions& options = worker_.options();
    uint64_t now = reactor_.now_ms();
    switch (phase_) {
    case Phase::Idle:
        if (state_ && state_->input_begin == state_->input_end) {
            worker_.release_state(std::move(state_));
        }
        deadline_ = now + options.keepalive_timeout_ms;
        // Per request this is usually a no-op: within the slack nothing moves.
        reactor_.timers().refresh(timer_, deadline_);
        return;
    case Phase::ReadingHead: // deadline_ was set once when the request began
        if (!timer_.scheduled() || timer_.deadline() != deadline_)
            reactor_.timers().schedule(timer_, deadline_);
        return;
    case Phase::ReadingBody:
        deadline_ = now + options.body_timeout_ms;
        reactor_.timers().refresh(timer_, deadline_);
        return;
    case Phase::Writing:
        deadline_ = now + options.send_timeout_ms;
        reactor_.timers().refresh(timer_, deadline_);
        return;
    case Phase::Lingering:
        return; // armed once when lingering began
    case Phase::Upstream:
        // Waiting on the client (body bytes or socket space): the client's
        // timeouts. Waiting on php-fpm: the backend connection's own timer
        // (--fastcgi-timeout) or the pool's queue timeout rule.
        if (proxy_blocked_)
            deadline_ = now + options.send_timeout_ms;
        else if (request_sent_ && body_remaining_ > 0 && upstream() && !upstream()->stdin_full())
            deadline_ = now + options.body_timeout_ms;
        else {
            reactor_.timers().cancel(timer_);
            return;
        }
        reactor_.timers().refresh(timer_, deadline_);
        return;
    }
}

void HttpConnection::on_timer(TimerEntry& entry) {
    HttpConnection* self = &OwnedTimerEntry<HttpConnection>::owner_of(entry);
    Reactor& reactor = self->reactor_;
    // refresh() with slack may fire a little before the real deadline.
    if (reactor.now_ms() < self->deadline_) {
        reactor.timers().schedule(entry, self->deadline_);
        return;
    }
    if (self->phase_ == Phase::ReadingHead)
        log_info("client %s: request head not complete within the header timeout, closing",
                 self->peer_.to_string().c_str());
    self->close();
}

HttpConnection::Step HttpConnection::fill_input() {
    RequestState& s = *state_;
    if (s.input.size() == 0) s.input.resize(kInitialInput);
    if (s.input_begin == s.input_end) s.input_begin = s.input_end = 0;
    if (s.input.size() - s.input_end < kMinReadSpace) {
        // Keep the request start at offset 0; the parser works on offsets, so
        // the bytes may move.
        if (s.input_begin > 0) {
            std::memmove(s.input.data(), s.input.data() + s.input_begin,
                         s.input_end - s.input_begin);
            s.input_end -= s.input_begin;
            s.input_begin = 0;
        }
        if (s.input.size() - s.input_end < kMinReadSpace && s.input.size() < kMaxInput)
            s.input.resize(std::min(s.input.size() * 2, kMaxInput));
    }
    size_t space = s.input.size() - s.input_end;
    if (space == 0) return Step::Close; // the parser's limits make this unreachable
    ssize_t n = ::read(fd_.get(), s.input.data() + s.input_end, space);
    if (n > 0) {
        s.input_end += size_t(n);
        head_moved_ = true;
        // A short read drained the socket; the next arrival raises a new edge.
        readable_ = size_t(n) == space || rdhup_;
        return Step::Continue;
    }
    if (n == 0) {
        peer_closed_ = true;
        readable_ = false;
        return Step::Continue;
    }
    if (errno == EAGAIN || errno == EINTR) {
        readable_ = errno == EINTR;
        return errno == EINTR ? Step::Continue : Step::Wait;
    }
    return Step::Close;
}

HttpConnection::Step HttpConnection::read_head() {
    if (!state_) {
        if (!readable_) return Step::Wait;
        state_ = worker_.acquire_state();
    }
    RequestState& s = *state_;
    if (s.input_end > s.input_begin) {
        std::span<const char> data(s.input.data() + s.input_begin, s.input_end - s.input_begin);
        switch (s.parser.parse(data)) {
        case ParseStatus::Done:
            return on_head_parsed();
        case ParseStatus::Error:
            s.site = nullptr; // before the Host: no site, no error page
            return respond_error(s.parser.error_status());
        case ParseStatus::Again:
            break;
        }
    }
    if (requests_this_pass_ >= kMaxRequestsPerPass) return Step::Yield;
    if (peer_closed_ || !readable_) {
        if (peer_closed_) return Step::Close; // idle or mid-head: nothing to answer
        return Step::Wait;
    }
    Step step = fill_input();
    if (step == Step::Continue && phase_ == Phase::Idle && s.input_end > s.input_begin) {
        // The header deadline is total, armed once per request: a trickling
        // client cannot extend it.
        set_phase(Phase::ReadingHead);
        deadline_ = reactor_.now_ms() + worker_.options().header_timeout_ms;
    }
    return step;
}

HttpConnection::Step HttpConnection::on_head_parsed() {
    RequestState& s = *state_;
    const Request& request = s.parser.request();
    head_size_ = s.parser.head_size();
    ++requests_;
    ++requests_this_pass_;
    ReactorLoad& load = reactor_.load();
    load.requests_total.store(load.requests_total.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
    keep_alive_ = request.keep_alive && requests_ < worker_.options().keepalive_requests &&
                  !reactor_.stopping();
    head_moved_ = false;
    body_chunked_ = false;
    body_remaining_ = 0;
    // The set is kept until the response is sent (SIGHUP may replace it): the
    // site's handlers, backend pool and log live in it.
    serving_ = worker_.serving();
    s.site = &serving_->for_host(request.host);
    if (fastcgi::ScriptResolver* scripts = s.site->scripts.get()) {
        switch (scripts->route(request)) {
        case fastcgi::RouteKind::Static:
            break;
        case fastcgi::RouteKind::Error:
            if (request.has_body()) keep_alive_ = false; // the body stays unread
            return respond_fastcgi_error(scripts->status());
        case fastcgi::RouteKind::Script:
            s.script_name.assign(scripts->script_name());
            s.path_info.assign(scripts->path_info());
            s.script_filename.assign(scripts->script_filename());
            fastcgi_ = true;
            break;
        }
    }
    if (!request.has_body()) return fastcgi_ ? start_fastcgi() : respond();

    if (request.content_length && *request.content_length > worker_.options().max_body_size)
        return respond_error(413);
    if (request.expect_continue && request.version_minor == 1) {
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] ssize_t n =
            send(fd_.get(), kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    body_chunked_ = request.chunked;
    body_remaining_ = request.content_length.value_or(0);
    // A Content-Length body streams to php-fpm as it arrives; a chunked one is
    // first read whole (read_body), since PHP needs CONTENT_LENGTH up front.
    if (fastcgi_ && !body_chunked_) return start_fastcgi();
    if (body_chunked_) s.chunked.reset(), s.fastcgi_body.clear();
    set_phase(Phase::ReadingBody);
    return Step::Continue;
}

// Static resources take no body: it is read and dropped (as nginx does), so the
// next request on the connection starts at the right byte. The head stays in
// place in the buffer; body bytes after it are consumed in place.
HttpConnection::Step HttpConnection::read_body() {
    RequestState& s = *state_;
    size_t body_start = s.input_begin + head_size_;
    for (;;) {
        size_t available = s.input_end - body_start;
        size_t consumed = 0;
        bool done = false;
        if (body_chunked_) {
            s.scratch.clear();
            auto status =
                s.chunked.feed({s.input.data() + body_start, available}, consumed, s.scratch);
            if (status == ChunkedDecoder::Status::Error) return respond_error(400);
            if (fastcgi_) s.fastcgi_body.append(s.scratch);
            if (s.chunked.body_size() > worker_.options().max_body_size) return respond_error(413);
            done = status == ChunkedDecoder::Status::Done;
        } else {
            consumed = size_t(std::min<uint64_t>(available, body_remaining_));
            body_remaining_ -= consumed;
            done = body_remaining_ == 0;
        }
        std::memmove(s.input.data() + body_start, s.input.data() + body_start + consumed,
                     available - consumed);
        s.input_end -= consumed;
        if (done) break;
        if (peer_closed_) return Step::Close;
        if (!readable_) return Step::Wait;
        Step step = fill_input();
        if (step != Step::Continue) return step;
        body_start = s.input_begin + head_size_; // fill_input may have moved the head
    }
    // The buffer may have moved while the body was read: parse the head again
    // so the request's views point at its current place.
    s.parser.reset();
    std::span<const char> head(s.input.data() + s.input_begin, head_size_);
    if (s.parser.parse(head) != ParseStatus::Done) {
        s.site = nullptr; // no request to fetch an error page for
        return respond_error(500);
    }
    head_moved_ = false;
    return fastcgi_ ? start_fastcgi() : respond();
}

HttpConnection::Step HttpConnection::respond() {
    RequestState& s = *state_;
    const Request& request = s.parser.request();
    Response& response = s.response;
    response.reset();
    const ServerOptions& options = worker_.options();
    SiteHandlers& site = *s.site;
    if (!options.status_path.empty() && request.path == options.status_path) {
        serve_status(request, response);
    } else if (!site.config || !serve_redirect(request, *site.config, response)) {
        site.files->handle(request, keep_alive_, reactor_.now_s(), reactor_.now_ms(), response);
        apply_site_error_page(request, response);
        if (site.config) add_site_headers(*site.config, response);
    }
    keep_alive_ = response.keep_alive;
    worker_.publish_cache_stats();
    error_response_ = false;
    log_access(response.status, response.body_bytes());
    head_sent_ = body_sent_ = 0;
    set_phase(Phase::Writing);
    return Step::Continue;
}

HttpConnection::Step HttpConnection::respond_error(int status) {
    RequestState& s = *state_;
    keep_alive_ = false;
    error_response_ = true;
    fastcgi_ = false;
    s.response.reset();
    build_error_response(status, false, reactor_.now_s(), s.response);
    if (s.site) apply_site_error_page(request_views(), s.response); // 413, a bad chunked body
    if (status == 400 || status == 414 || status == 431 || status == 501 || status == 505)
        log_info("client %s: %d: %s", peer_.to_string().c_str(), status, s.parser.error_reason());
    log_access(status, s.response.body_bytes());
    head_sent_ = body_sent_ = 0;
    head_size_ = s.input_end - s.input_begin; // nothing after an error is read as a request
    set_phase(Phase::Writing);
    return Step::Continue;
}

void HttpConnection::log_access(int status, uint64_t bytes) {
    WorkerStats& stats = worker_.stats();
    WorkerStats::bump(stats.requests);
    WorkerStats::bump(stats.bytes_sent, bytes);
    if (status >= 100 && status < 600) WorkerStats::bump(stats.responses[status]);
    // nginx's access_log per server: the site's own file, else the global one.
    AsyncLogger& log = state_ && state_->site && state_->site->access_log
                           ? *state_->site->access_log
                           : worker_.access_log();
    if (!log.enabled()) return;
    AccessLogEntry entry{};
    std::string host;
    peer_.format_host(host);
    entry.remote_addr = host;
    entry.time = reactor_.now_s();
    entry.status = status;
    entry.bytes_sent = bytes;
    if (!error_response_) {
        const Request& request = state_->parser.request();
        entry.method = request.method_text;
        entry.target = request.target;
        entry.protocol = protocol_name(request);
        entry.referer = request.referer;
        entry.user_agent = request.user_agent;
    }
    std::string& line = worker_.log_line();
    line.clear();
    append_combined_line(entry, line);
    log.append(line);
}

HttpConnection::Step HttpConnection::write_response() {
    Response& response = state_->response;
    while (head_sent_ < response.head.size() || body_sent_ < response.body.size()) {
        iovec iov[2] = {
            {response.head.data() + head_sent_, response.head.size() - head_sent_},
            {const_cast<char*>(response.body.data()) + body_sent_,
             response.body.size() - body_sent_},
        };
        msghdr message{};
        message.msg_iov = iov[0].iov_len ? iov : iov + 1;
        message.msg_iovlen = iov[0].iov_len ? 2 : 1;
        // MSG_MORE: let the head share a segment with the first file bytes.
        int flags = MSG_NOSIGNAL | (response.file_length ? MSG_MORE : 0);
        ssize_t n = sendmsg(fd_.get(), &message, flags);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return Step::Wait;
            if (!is_disconnect(errno))
                log_info("send to %s: %s", peer_.to_string().c_str(), strerror(errno));
            return Step::Close;
        }
        size_t sent = size_t(n);
        size_t to_head = std::min(sent, response.head.size() - head_sent_);
        head_sent_ += to_head;
        body_sent_ += sent - to_head;
        bytes_this_pass_ += sent;
    }
    while (response.file_length > 0) {
        if (bytes_this_pass_ >= kMaxBytesPerPass) return Step::Yield;
        size_t chunk = size_t(std::min<uint64_t>(response.file_length, kMaxBytesPerPass));
        off_t offset = off_t(response.file_offset);
        ssize_t n = sendfile(fd_.get(), response.file_fd, &offset, chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return Step::Wait;
            if (!is_disconnect(errno))
                log_error("sendfile to %s: %s", peer_.to_string().c_str(), strerror(errno));
            return Step::Close;
        }
        if (n == 0) {
            // The file shrank under us: what was promised cannot be sent.
            log_error("sendfile: file shrank while being sent to %s (%llu bytes missing)",
                      peer_.to_string().c_str(),
                      static_cast<unsigned long long>(response.file_length));
            return Step::Close;
        }
        response.file_offset += uint64_t(n);
        response.file_length -= uint64_t(n);
        bytes_this_pass_ += uint64_t(n);
    }
    return finish_response();
}

HttpConnection::Step HttpConnection::finish_response() {
    RequestState& s = *state_;
    s.response.reset(); // releases the cached file
    s.site = nullptr;   // lives in serving_
    serving_.reset();
    s.input_begin += head_size_;
    s.parser.reset();
    head_size_ = 0;
    if (!keep_alive_ || peer_closed_) {
        bool unread = s.input_end > s.input_begin || readable_;
        if (!error_response_ && !unread) return Step::Close;
        // Closing with unread input makes the kernel send RST, which can destroy
        // the response before the client reads it: shut down our side and drain
        // for a while first (nginx's lingering close).
        ::shutdown(fd_.get(), SHUT_WR);
        set_phase(Phase::Lingering);
        deadline_ = reactor_.now_ms() + kLingerMs;
        reactor_.timers().schedule(timer_, deadline_);
        return Step::Continue;
    }
    set_phase(Phase::Idle);
    if (s.input_begin == s.input_end) s.input_begin = s.input_end = 0;
    return Step::Continue;
}

HttpConnection::Step HttpConnection::linger() {
    char sink[4096];
    for (;;) {
        ssize_t n = ::read(fd_.get(), sink, sizeof sink);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return Step::Wait;
        return Step::Close;
    }
}

void HttpConnection::close() {
    if (closed_) return;
    closed_ = true;
    set_phase(Phase::Idle);
    reactor_.timers().cancel(timer_);
    // A queued or proxied request holds serving_, so its site and pool are alive.
    if (upstream_queued()) serving_->pool_of(*state_->site).cancel_wait(*this);
    if (fastcgi_ && state_) {
        request_views();
        // nginx's 499: the client left before the response was complete.
        log_access(proxy_head_built_ ? proxy_status_ : 499,
                   proxy_bytes_sent_ > proxy_head_size_ ? proxy_bytes_sent_ - proxy_head_size_ : 0);
        fastcgi_ = false;
    }
    // Drains the rest of the response into the void, then pools the connection.
    if (upstream()) upstream()->release();
    reactor_.remove(fd_.get());
    fd_.reset();
    if (state_) {
        state_->response.reset();
        worker_.release_state(std::move(state_));
    }
    if (!in_drive_) delete this;
}

} // namespace lepus
