#include "net/acceptor.h"

#include "base/clock.h"
#include "log/error_log.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

namespace lepus {
namespace {

constexpr uint64_t kStopCookie = ~uint64_t{0};
constexpr uint64_t kPauseCookie = ~uint64_t{0} - 1;

UniqueFd open_reserve_fd() {
    return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

} // namespace

Acceptor::Acceptor(std::vector<UniqueFd> listeners, std::span<Reactor* const> reactors,
                   std::span<ReactorLoad> loads, std::atomic<int64_t>& live_total,
                   const AcceptorOptions& options)
    : listeners_(std::move(listeners)), reactors_(reactors.begin(), reactors.end()),
      balancer_(loads), live_total_(live_total), options_(options) {}

bool Acceptor::init(std::string& error) {
    epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
    stop_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    pause_timer_fd_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    reserve_fd_ = open_reserve_fd();
    if (!epoll_fd_ || !stop_fd_ || !pause_timer_fd_ || !reserve_fd_) {
        error = std::string("cannot create acceptor descriptors: ") + strerror(errno);
        return false;
    }
    epoll_event stop{EPOLLIN, {.u64 = kStopCookie}};
    epoll_event pause{EPOLLIN, {.u64 = kPauseCookie}};
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, stop_fd_.get(), &stop);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, pause_timer_fd_.get(), &pause);
    resume_listeners();
    return true;
}

void Acceptor::request_stop() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(stop_fd_.get(), &one, sizeof one);
}

void Acceptor::resume_listeners() {
    // Level-triggered: a backlog left over after a pause is picked up at once.
    for (size_t i = 0; i < listeners_.size(); ++i) {
        epoll_event event{EPOLLIN, {.u64 = i}};
        epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listeners_[i].get(), &event);
    }
    paused_ = false;
}

void Acceptor::pause_listeners() {
    for (auto& listener : listeners_)
        epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, listener.get(), nullptr);
    itimerspec spec{};
    spec.it_value.tv_sec = options_.emfile_pause_ms / 1000;
    spec.it_value.tv_nsec = long(options_.emfile_pause_ms % 1000) * 1000000;
    timerfd_settime(pause_timer_fd_.get(), 0, &spec, nullptr);
    paused_ = true;

    ++emfile_since_log_;
    uint64_t now = monotonic_ms();
    if (now - last_emfile_log_ms_ >= 1000) {
        log_error("accept: out of file descriptors (%s); pausing accepts for %u ms (%llu times "
                  "since the last report)",
                  strerror(errno), options_.emfile_pause_ms,
                  static_cast<unsigned long long>(emfile_since_log_));
        last_emfile_log_ms_ = now;
        emfile_since_log_ = 0;
    }
}

void Acceptor::refuse_over_limit(int fd) {
    static constexpr char kBusy[] =
        "HTTP/1.1 503 Service Unavailable\r\nServer: lepus\r\n"
        "Content-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
    [[maybe_unused]] ssize_t n = send(fd, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    refused_.fetch_add(1, std::memory_order_relaxed);
}

bool Acceptor::dispatch(const AcceptedSocket& socket, std::vector<bool>& woken) {
    size_t first = balancer_.pick(monotonic_ms());
    // A full ring means that reactor is far behind: try the others in turn.
    for (size_t k = 0; k < reactors_.size(); ++k) {
        size_t i = (first + k) % reactors_.size();
        if (reactors_[i]->hand_off(socket)) {
            if (i != first) balancer_.reassign(first, i);
            woken[i] = true;
            return true;
        }
    }
    balancer_.unpick(first);
    return false;
}

void Acceptor::accept_ready(int listener) {
    std::vector<bool> woken(reactors_.size(), false);
    for (;;) {
        AcceptedSocket socket;
        socket.peer.length = sizeof socket.peer.storage;
        socket.fd = accept4(listener, &socket.peer.storage.any, &socket.peer.length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (socket.fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                // Accept and drop one so the client hears a close rather than
                // waiting in the backlog, then back off.
                reserve_fd_.reset();
                int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
                if (fd >= 0) ::close(fd);
                reserve_fd_ = open_reserve_fd();
                pause_listeners();
            } else if (errno != EAGAIN) {
                log_error("accept: %s", strerror(errno));
            }
            break;
        }
        accepted_.fetch_add(1, std::memory_order_relaxed);
        if (options_.max_connections > 0 &&
            live_total_.load(std::memory_order_relaxed) >= options_.max_connections) {
            refuse_over_limit(socket.fd);
            continue;
        }
        int one = 1;
        setsockopt(socket.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        live_total_.fetch_add(1, std::memory_order_relaxed);
        if (!dispatch(socket, woken)) {
            live_total_.fetch_sub(1, std::memory_order_relaxed);
            refuse_over_limit(socket.fd);
        }
        if (paused_) break;
    }
    for (size_t i = 0; i < reactors_.size(); ++i)
        if (woken[i]) reactors_[i]->wake_if_sleeping();
}

void Acceptor::run() {
    epoll_event events[16];
    bool stopping = false;
    while (!stopping) {
        int n = epoll_wait(epoll_fd_.get(), events, 16, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            log_error("acceptor: epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; ++i) {
            uint64_t key = events[i].data.u64;
            if (key == kStopCookie) {
                stopping = true;
            } else if (key == kPauseCookie) {
                uint64_t expirations;
                [[maybe_unused]] ssize_t r =
                    read(pause_timer_fd_.get(), &expirations, sizeof expirations);
                if (paused_) resume_listeners();
            } else if (!paused_ && key < listeners_.size()) {
                accept_ready(listeners_[key].get());
            }
        }
    }
    listeners_.clear(); // stop accepting: new clients are refused by the kernel
}

} // namespace lepus
