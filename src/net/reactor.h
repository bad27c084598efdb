// Reactor: one thread, one core, one edge-triggered event loop (epoll, or
// io_uring with --io uring: see net/poller.h).
//
// A connection is registered once (EPOLLIN|EPOLLOUT|EPOLLRDHUP, edge-triggered) and
// lives on its reactor until it closes: no locks on the hot path. Handlers sit
// in a table indexed by fd; the epoll cookie packs fd and a generation, so an
// event or deferred resume for a closed-and-reused fd is recognised and dropped
// (nginx's "instance" bit does the same job).
//
// New connections arrive from the acceptor thread through an SPSC ring; the
// acceptor writes the reactor's eventfd only when the reactor may be asleep.
// Timeouts live in the reactor's TimerWheel; one timerfd in the same poller is
// armed to the wheel's next expiry, so an idle reactor does not tick.
#pragma once

#include "base/unique_fd.h"
#include "net/balancer.h"
#include "net/loop_clock.h"
#include "net/poller.h"
#include "net/socket.h"
#include "net/spsc_ring.h"
#include "net/timer_wheel.h"

#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lepus {

// What travels from the acceptor to a reactor.
struct AcceptedSocket {
    int fd = -1;
    SocketAddress peer;
    bool tls = false; // came in on a TLS (https://) listener
    bool h2c = false; // came in on an h2c:// listener: HTTP/2 from the first byte
};

// Something registered in a reactor: a client connection or a backend socket.
class EventHandler {
public:
    // Events for this fd (EPOLLIN, EPOLLOUT, ...), or kResumeEvent when a deferred handler is
    // resumed.
    virtual void on_events(uint32_t events) = 0;
    // The reactor starts draining: finish what is in flight, close if idle.
    virtual void on_shutdown() = 0;
    // The drain deadline passed: close now.
    virtual void on_force_close() = 0;
    // The reactor starts draining, for a handler that is not a connection: a
    // listener of the reactor's own stops accepting (else new clients would
    // keep the drain from ever ending).
    virtual void on_stop_accepting() {}

protected:
    ~EventHandler() = default;
};

// Passed to on_events for handlers resumed from the ready list (not an epoll bit).
inline constexpr uint32_t kResumeEvent = 1u << 31;

class Reactor;
// Called on the reactor thread for each connection handed over by the acceptor.
using AcceptCallback = void (*)(Reactor& reactor, const AcceptedSocket& socket, void* context);

struct ReactorOptions {
    size_t index = 0;
    int cpu = -1;                // core to pin the thread to; -1: no pinning
    size_t ring_capacity = 4096; // accepted sockets in flight from the acceptor
    size_t max_fds = 65536;      // size of the handler table (RLIMIT_NOFILE)
    uint32_t shutdown_timeout_ms = 10000;
    IoBackend io = IoBackend::Epoll;
};

class Reactor {
public:
    Reactor(const ReactorOptions& options, ReactorLoad& load, std::atomic<int64_t>& live_total,
            AcceptCallback on_accept, void* context);
    Reactor(const Reactor&) = delete;
    Reactor& operator=(const Reactor&) = delete;

    // Creates the poller, eventfd and timerfd. One line in `error` on failure.
    bool init(std::string& error);
    // The loop; returns after request_stop() once every handler has closed
    // or the shutdown timeout has passed.
    void run();

    // --- any thread ---
    // Starts a graceful stop (idempotent).
    void request_stop();
    // Runs `task` on the reactor thread at its next turn (a SIGHUP's listener
    // changes, a basic-auth verdict from a verifier thread: rare work, never
    // per request: it takes a mutex).
    void post(std::function<void()> task);
    // --- acceptor thread only ---
    // Queues a socket for this reactor; false when the ring is full.
    bool hand_off(const AcceptedSocket& socket);
    // Writes the eventfd if the reactor may be blocked waiting for events.
    void wake_if_sleeping();

    // --- reactor thread only ---
    // Registers `fd` edge-triggered for `events`, counting it as a connection
    // when `is_connection` (live counts feed the balancer and --max-connections).
    // With `watch` false the fd is in the handler table but not yet in the
    // poller: a connection that is answered and closed in its first pass then
    // costs no epoll_ctl at all; watch() adds it when it must wait.
    bool add(int fd, EventHandler* handler, uint32_t events, bool is_connection, bool watch = true);
    // Puts an fd added with watch = false into the poller (idempotent). An edge
    // that happened before is not lost: the poller reports current readiness.
    bool watch(int fd);
    // Forgets `fd` (call right before closing it): later events for it are
    // dropped. With epoll the kernel takes a closed fd out of the set by itself
    // (lepus never dups them), so no epoll_ctl(DEL) is spent unless `keep_open`.
    void remove(int fd, bool keep_open = false);
    // A connection this reactor accepted itself (--accept reuseport): handed to
    // the accept callback as if it had come through the ring.
    void accept_local(const AcceptedSocket& socket) { on_accept_(*this, socket, accept_context_); }
    // Runs the handler again (kResumeEvent) after this round of events, so a
    // busy connection yields to the others instead of monopolising the loop.
    void defer(int fd);
    // A connection that has no fd of its own (QUIC, on a shared UDP socket)
    // opened or closed: a drain waits for it as for the connections added.
    void hold_drain(bool opened) { opened ? ++drain_holds_ : --drain_holds_; }
    TimerWheel& timers() { return timers_; }
    uint64_t now_ms() const { return clock_.now_ms; }
    time_t now_s() const { return clock_.now_s; }
    const LoopClock& clock() const { return clock_; }
    ReactorLoad& load() { return load_; }
    size_t index() const { return options_.index; }
    bool stopping() const { return draining_; }
    size_t live_connections() const { return live_; }

private:
    struct Slot {
        EventHandler* handler = nullptr;
        uint32_t generation = 0;
        uint32_t events = 0;
        bool is_connection = false;
        bool watched = false; // in the poller
    };
    static uint64_t cookie(int fd, uint32_t generation) {
        return (uint64_t(generation) << 32) | uint32_t(fd);
    }
    EventHandler* lookup(uint64_t cookie) const;
    void drain_inbox();
    void run_posted();
    void run_deferred();
    void dispatch(const ReadyEvent& event);
    void update_clock();
    void arm_timerfd();
    void start_draining();

    ReactorOptions options_;
    ReactorLoad& load_;
    std::atomic<int64_t>& live_total_;
    AcceptCallback on_accept_;
    void* accept_context_;

    std::unique_ptr<Poller> poller_;
    UniqueFd wake_fd_, timer_fd_;
    SpscRing<AcceptedSocket> inbox_;
    std::vector<Slot> slots_;
    uint32_t next_generation_ = 1;
    size_t live_ = 0;
    size_t drain_holds_ = 0; // see hold_drain()
    std::vector<uint64_t> deferred_, deferred_running_;
    TimerWheel timers_;
    uint64_t armed_expiry_ = 0; // 0: timerfd disarmed
    LoopClock clock_;

    alignas(64) std::atomic<bool> sleeping_{false};
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> has_posted_{false};
    std::mutex posted_mutex_;
    std::vector<std::function<void()>> posted_;
    bool draining_ = false;
    uint64_t drain_deadline_ms_ = 0;
};

} // namespace lepus
