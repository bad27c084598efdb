#include "net/acceptor.h"

#include "base/clock.h"
#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <utility>

namespace lepus {
namespace {

constexpr uint64_t kWakeCookie = ~uint64_t{0};
constexpr uint64_t kPauseCookie = ~uint64_t{0} - 1;

UniqueFd open_reserve_fd() {
    return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

} // namespace

Acceptor::Acceptor(std::vector<UniqueFd> listeners, std::vector<int> tls_listeners,
                   std::vector<int> h2c_listeners, std::span<Reactor* const> reactors,
                   std::span<ReactorLoad> loads, std::atomic<int64_t>& live_total,
                   const AcceptorOptions& options)
    : listeners_(std::move(listeners)), tls_listeners_(std::move(tls_listeners)),
      h2c_listeners_(std::move(h2c_listeners)), reactors_(reactors.begin(), reactors.end()),
      woken_(reactors_.size(), false), balancer_(loads),
      admission_(live_total, options.max_connections), options_(options) {}

bool Acceptor::init(std::string& error) {
    wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    reserve_fd_ = open_reserve_fd();
    if (!wake_fd_ || !reserve_fd_) {
        error = std::string("cannot create acceptor descriptors: ") + strerror(errno);
        return false;
    }
    if (options_.io == IoBackend::Uring) return true; // run_uring sets up its ring
    epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
    pause_timer_fd_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!epoll_fd_ || !pause_timer_fd_) {
        error = std::string("cannot create acceptor descriptors: ") + strerror(errno);
        return false;
    }
    epoll_event wake{EPOLLIN, {.u64 = kWakeCookie}};
    epoll_event pause{EPOLLIN, {.u64 = kPauseCookie}};
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &wake);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, pause_timer_fd_.get(), &pause);
    resume_listeners();
    return true;
}

void Acceptor::request_stop() {
    stop_requested_.store(true);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
}

void Acceptor::change_listeners(std::vector<UniqueFd> added, std::vector<int> removed,
                                std::vector<int> added_tls, std::vector<int> added_h2c) {
    {
        std::lock_guard lock(changes_mutex_);
        for (UniqueFd& fd : added)
            changes_.added.push_back(std::move(fd));
        changes_.removed.insert(changes_.removed.end(), removed.begin(), removed.end());
        changes_.added_tls.insert(changes_.added_tls.end(), added_tls.begin(), added_tls.end());
        changes_.added_h2c.insert(changes_.added_h2c.end(), added_h2c.begin(), added_h2c.end());
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
}

Acceptor::ListenerChange Acceptor::take_changes() {
    uint64_t count;
    [[maybe_unused]] ssize_t n = read(wake_fd_.get(), &count, sizeof count);
    std::lock_guard lock(changes_mutex_);
    return std::exchange(changes_, {});
}

void Acceptor::note_tls_listeners(const ListenerChange& change) {
    for (int fd : change.removed) {
        std::erase(tls_listeners_, fd);
        std::erase(h2c_listeners_, fd);
    }
    tls_listeners_.insert(tls_listeners_.end(), change.added_tls.begin(), change.added_tls.end());
    h2c_listeners_.insert(h2c_listeners_.end(), change.added_h2c.begin(), change.added_h2c.end());
}

void Acceptor::apply_changes_epoll() {
    ListenerChange change = take_changes();
    note_tls_listeners(change);
    for (int fd : change.removed)
        std::erase_if(listeners_, [fd](const UniqueFd& listener) { return listener.get() == fd; });
    for (UniqueFd& fd : change.added) {
        // The kernel drops a closed listener from the epoll set by itself.
        epoll_event event{EPOLLIN, {.u64 = uint64_t(fd.get())}};
        if (!paused_) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd.get(), &event);
        listeners_.push_back(std::move(fd));
    }
}

void Acceptor::resume_listeners() {
    // Level-triggered: a backlog left over after a pause is picked up at once.
    for (const UniqueFd& listener : listeners_) {
        epoll_event event{EPOLLIN, {.u64 = uint64_t(listener.get())}};
        epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listener.get(), &event);
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
}

void Acceptor::shed_one(int listener, int error) {
    reserve_fd_.reset();
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    reserve_fd_ = open_reserve_fd();

    ++emfile_since_log_;
    uint64_t now = monotonic_ms();
    if (now - last_emfile_log_ms_ >= 1000) {
        log_error("accept: out of file descriptors (%s); pausing accepts for %u ms (%llu times "
                  "since the last report)",
                  strerror(error), options_.emfile_pause_ms,
                  static_cast<unsigned long long>(emfile_since_log_));
        last_emfile_log_ms_ = now;
        emfile_since_log_ = 0;
    }
}

bool Acceptor::dispatch(const AcceptedSocket& socket) {
    size_t first = balancer_.pick(monotonic_ms());
    // A full ring means that reactor is far behind: try the others in turn.
    for (size_t k = 0; k < reactors_.size(); ++k) {
        size_t i = (first + k) % reactors_.size();
        if (reactors_[i]->hand_off(socket)) {
            if (i != first) balancer_.reassign(first, i);
            woken_[i] = true;
            return true;
        }
    }
    balancer_.unpick(first);
    return false;
}

void Acceptor::take_connection(AcceptedSocket& socket, int listener) {
    socket.tls =
        std::find(tls_listeners_.begin(), tls_listeners_.end(), listener) != tls_listeners_.end();
    socket.h2c =
        std::find(h2c_listeners_.begin(), h2c_listeners_.end(), listener) != h2c_listeners_.end();
    if (!admission_.admit(socket)) return;
    if (!dispatch(socket)) admission_.refuse_admitted(socket.fd, socket.tls);
}

bool Acceptor::is_listener(int fd) const {
    for (const UniqueFd& listener : listeners_)
        if (listener.get() == fd) return true;
    return false;
}

void Acceptor::wake_reactors() {
    for (size_t i = 0; i < reactors_.size(); ++i)
        if (woken_[i]) {
            reactors_[i]->wake_if_sleeping();
            woken_[i] = false;
        }
}

void Acceptor::accept_ready(int listener) {
    for (;;) {
        AcceptedSocket socket;
        if (!accept_one(listener, socket)) {
            if (errno == EMFILE || errno == ENFILE) {
                shed_one(listener, errno);
                pause_listeners();
            } else if (errno != EAGAIN) {
                log_error("accept: %s", strerror(errno));
            }
            break;
        }
        take_connection(socket, listener);
    }
    wake_reactors();
}

void Acceptor::run() {
    if (options_.io == IoBackend::Uring)
        run_uring();
    else
        run_epoll();
    listeners_.clear(); // stop accepting: new clients are refused by the kernel
}

void Acceptor::run_epoll() {
    epoll_event events[16];
    for (;;) {
        int n = epoll_wait(epoll_fd_.get(), events, 16, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            log_error("acceptor: epoll_wait: %s", strerror(errno));
            return;
        }
        for (int i = 0; i < n; ++i) {
            uint64_t key = events[i].data.u64;
            if (key == kWakeCookie) {
                if (stop_requested_.load()) return;
                apply_changes_epoll();
            } else if (key == kPauseCookie) {
                uint64_t expirations;
                [[maybe_unused]] ssize_t r =
                    read(pause_timer_fd_.get(), &expirations, sizeof expirations);
                if (paused_) resume_listeners();
            } else if (!paused_ && is_listener(int(key))) {
                accept_ready(int(key));
            }
        }
    }
}

} // namespace lepus
