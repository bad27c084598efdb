#include "net/reactor.h"

#include "base/clock.h"
#include "log/error_log.h"

#include <cerrno>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h> // the event bits; the poller may be io_uring
#include <sys/eventfd.h>
#include <sys/timerfd.h>

namespace lepus {
namespace {

// Cookies of the reactor's own fds; connection cookies always carry a
// generation >= 1 in their upper half, so these cannot collide.
constexpr uint64_t kWakeCookie = 0xffffffffu;
constexpr uint64_t kTimerCookie = 0xfffffffeu;
constexpr int kMaxEvents = 512;

} // namespace

Reactor::Reactor(const ReactorOptions& options, ReactorLoad& load, std::atomic<int64_t>& live_total,
                 AcceptCallback on_accept, void* context)
    : options_(options), load_(load), live_total_(live_total), on_accept_(on_accept),
      accept_context_(context), inbox_(options.ring_capacity), slots_(options.max_fds),
      timers_(monotonic_ms()) {
    update_clock();
}

bool Reactor::init(std::string& error) {
    poller_ = make_poller(options_.io, error);
    if (!poller_) return false;
    wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    timer_fd_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!wake_fd_ || !timer_fd_) {
        error = std::string("cannot create reactor descriptors: ") + strerror(errno);
        return false;
    }
    return poller_->add(wake_fd_.get(), EPOLLIN, kWakeCookie, error) &&
           poller_->add(timer_fd_.get(), EPOLLIN, kTimerCookie, error);
}

void Reactor::request_stop() {
    stop_requested_.store(true, std::memory_order_seq_cst);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
}

void Reactor::post(std::function<void()> task) {
    {
        std::lock_guard lock(posted_mutex_);
        posted_.push_back(std::move(task));
    }
    has_posted_.store(true, std::memory_order_release);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
}

void Reactor::run_posted() {
    std::vector<std::function<void()>> tasks;
    {
        std::lock_guard lock(posted_mutex_);
        tasks.swap(posted_);
        has_posted_.store(false, std::memory_order_relaxed);
    }
    for (auto& task : tasks)
        task();
}

bool Reactor::hand_off(const AcceptedSocket& socket) {
    return inbox_.try_push(socket);
}

void Reactor::wake_if_sleeping() {
    // Pairs with the fence in run(): either the reactor sees the pushed socket
    // before sleeping, or we see it sleeping and wake it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_relaxed)) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
    }
}

bool Reactor::add(int fd, EventHandler* handler, uint32_t events, bool is_connection, bool watch) {
    if (fd < 0 || size_t(fd) >= slots_.size()) {
        log_error("fd %d is beyond the handler table (%zu); raise RLIMIT_NOFILE", fd,
                  slots_.size());
        return false;
    }
    Slot& slot = slots_[fd];
    slot.handler = handler;
    slot.generation = next_generation_++;
    if (next_generation_ == 0) next_generation_ = 1;
    slot.is_connection = is_connection;
    slot.events = events;
    slot.watched = false;
    if (watch && !this->watch(fd)) {
        slot.handler = nullptr;
        return false;
    }
    if (is_connection) {
        ++live_;
        load_.live_connections.store(uint32_t(live_), std::memory_order_relaxed);
    }
    return true;
}

bool Reactor::watch(int fd) {
    Slot& slot = slots_[fd];
    if (slot.watched) return true;
    std::string error;
    if (!poller_->add(fd, slot.events, cookie(fd, slot.generation), error)) {
        log_error("%s", error.c_str());
        return false;
    }
    slot.watched = true;
    return true;
}

void Reactor::remove(int fd, bool keep_open) {
    Slot& slot = slots_[fd];
    if (!slot.handler) return;
    if (slot.watched) poller_->remove(fd, cookie(fd, slot.generation), !keep_open);
    slot.watched = false;
    slot.handler = nullptr;
    ++slot.generation;
    if (slot.is_connection) {
        --live_;
        load_.live_connections.store(uint32_t(live_), std::memory_order_relaxed);
        live_total_.fetch_sub(1, std::memory_order_relaxed);
    }
}

void Reactor::defer(int fd) {
    if (fd >= 0 && size_t(fd) < slots_.size() && slots_[fd].handler)
        deferred_.push_back(cookie(fd, slots_[fd].generation));
}

EventHandler* Reactor::lookup(uint64_t key) const {
    auto fd = uint32_t(key);
    if (fd >= slots_.size()) return nullptr;
    const Slot& slot = slots_[fd];
    return slot.generation == uint32_t(key >> 32) ? slot.handler : nullptr;
}

void Reactor::update_clock() {
    clock_.now_ms = monotonic_ms();
    clock_.now_s = wall_seconds();
}

void Reactor::drain_inbox() {
    AcceptedSocket socket;
    while (inbox_.try_pop(socket)) {
        if (draining_) {
            ::close(socket.fd);
            live_total_.fetch_sub(1, std::memory_order_relaxed);
        } else {
            on_accept_(*this, socket, accept_context_);
        }
        // After live_connections: the balancer must not count it twice.
        load_.accepted_total.fetch_add(1, std::memory_order_release);
    }
}

void Reactor::run_deferred() {
    // Handlers resumed now may defer themselves again: they go to the next round.
    deferred_running_.swap(deferred_);
    for (uint64_t key : deferred_running_)
        if (EventHandler* handler = lookup(key)) handler->on_events(kResumeEvent);
    deferred_running_.clear();
}

void Reactor::dispatch(const ReadyEvent& event) {
    if (event.cookie == kWakeCookie) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = read(wake_fd_.get(), &count, sizeof count);
        return;
    }
    if (event.cookie == kTimerCookie) {
        uint64_t expirations;
        [[maybe_unused]] ssize_t n = read(timer_fd_.get(), &expirations, sizeof expirations);
        armed_expiry_ = 0;
        timers_.expire(clock_.now_ms);
        return;
    }
    if (EventHandler* handler = lookup(event.cookie)) handler->on_events(event.events);
}

void Reactor::arm_timerfd() {
    auto next = timers_.next_expiry();
    uint64_t wanted = next ? std::max<uint64_t>(*next, 1) : 0;
    if (wanted == armed_expiry_) return;
    itimerspec spec{};
    if (wanted) {
        // An expiry already due still needs a non-zero value: zero disarms.
        uint64_t at = std::max(wanted, clock_.now_ms + 1);
        spec.it_value.tv_sec = time_t(at / 1000);
        spec.it_value.tv_nsec = long(at % 1000) * 1000000;
    }
    timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
    armed_expiry_ = wanted;
}

void Reactor::start_draining() {
    draining_ = true;
    drain_deadline_ms_ = clock_.now_ms + options_.shutdown_timeout_ms;
    // slots_ has a fixed size (max_fds), so a handler that removes itself does not
    // invalidate the loop.
    for (Slot& slot : slots_) {
        if (!slot.handler) continue;
        if (slot.is_connection)
            slot.handler->on_shutdown();
        else
            slot.handler->on_stop_accepting();
    }
}

void Reactor::run() {
    if (options_.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(options_.cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            log_warn("reactor %zu: cannot pin to cpu %d", options_.index, options_.cpu);
    }
    poller_->attach_thread();
    ReadyEvent events[kMaxEvents];
    for (;;) {
        drain_inbox();
        if (has_posted_.load(std::memory_order_acquire)) run_posted();
        if (stop_requested_.load(std::memory_order_relaxed) && !draining_) start_draining();
        if (draining_) {
            if (live_ == 0 && drain_holds_ == 0) break;
            if (clock_.now_ms >= drain_deadline_ms_) {
                for (Slot& slot : slots_)
                    if (slot.handler && slot.is_connection) slot.handler->on_force_close();
                break;
            }
        }
        run_deferred();
        arm_timerfd();

        int timeout = -1;
        if (!deferred_.empty()) {
            timeout = 0;
        } else {
            if (draining_) timeout = int(drain_deadline_ms_ - clock_.now_ms) + 1;
            sleeping_.store(true, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_seq_cst);
            if (!inbox_.empty_approx() ||
                stop_requested_.load(std::memory_order_relaxed) != draining_)
                timeout = 0;
        }
        int n = poller_->wait(events, timeout);
        sleeping_.store(false, std::memory_order_relaxed);
        update_clock();
        if (n < 0) {
            if (errno == EINTR) continue;
            log_error("reactor %zu: waiting for events (%s): %s", options_.index,
                      io_backend_name(options_.io), strerror(errno));
            break;
        }
        for (int i = 0; i < n; ++i)
            dispatch(events[i]);
    }
}

} // namespace lepus
