// Acceptor: the thread that owns the listening sockets, accepts until EAGAIN
// and hands each connection to a reactor chosen by the Balancer.
//
// Running out of descriptors (EMFILE/ENFILE) must not busy-loop: the acceptor
// keeps one reserve fd to accept-and-close the newcomer (so it is not left
// waiting in the backlog), then stops watching the listeners for a back-off
// period on a timerfd, because the reserve-fd trick alone still spins when the
// backlog refills at once (libuv#690). Above --max-connections a newcomer gets
// a short 503 and is closed.
//
// With --io uring the acceptor arms one multishot accept per listener on its
// own io_uring instead of epoll + accept4 until EAGAIN (acceptor_uring.cc).
// Listeners can be swapped while it runs (SIGHUP with changed addresses).
#pragma once

#include "base/unique_fd.h"
#include "net/admission.h"
#include "net/balancer.h"
#include "net/poller.h"
#include "net/reactor.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace lepus {

struct AcceptorOptions {
    int64_t max_connections = 0; // 0: unlimited
    uint32_t emfile_pause_ms = 200;
    IoBackend io = IoBackend::Epoll;
};

class Acceptor {
public:
    // `tls_listeners`: the fds among `listeners` whose connections speak TLS;
    // `h2c_listeners`: those whose connections speak HTTP/2 only (h2c://).
    Acceptor(std::vector<UniqueFd> listeners, std::vector<int> tls_listeners,
             std::vector<int> h2c_listeners, std::span<Reactor* const> reactors,
             std::span<ReactorLoad> loads, std::atomic<int64_t>& live_total,
             const AcceptorOptions& options);

    bool init(std::string& error);
    // Accepts until request_stop(); closes the listening sockets before returning.
    void run();
    // Any thread.
    void request_stop();
    // Any thread: start accepting on `added` and close the listeners whose fds
    // are in `removed` (the fds given at construction or in an earlier call);
    // `added_tls`, `added_h2c`: the fds among `added` that are TLS, h2c:// listeners.
    void change_listeners(std::vector<UniqueFd> added, std::vector<int> removed,
                          std::vector<int> added_tls = {}, std::vector<int> added_h2c = {});

    uint64_t accepted() const { return admission_.accepted(); }
    uint64_t refused() const { return admission_.refused(); }

private:
    struct ListenerChange {
        std::vector<UniqueFd> added;
        std::vector<int> removed;
        std::vector<int> added_tls, added_h2c;
    };

    struct UringLoop; // acceptor_uring.cc
    void run_epoll();
    void run_uring();
    // Takes the changes queued by change_listeners (acceptor thread).
    ListenerChange take_changes();
    void apply_changes_epoll();
    // Both loops: what happens to a freshly accepted socket.
    void take_connection(AcceptedSocket& socket, int listener);
    // Accepts one pending connection on the reserve fd and closes it, so the
    // client hears a close instead of waiting in the backlog; logs once a second.
    void shed_one(int listener, int error);
    bool is_listener(int fd) const;
    // Applies a change's TLS and h2c marks (acceptor thread).
    void note_tls_listeners(const ListenerChange& change);
    // Wakes the reactors that were handed sockets since the last call.
    void wake_reactors();
    void accept_ready(int listener);
    bool dispatch(const AcceptedSocket& socket);
    void pause_listeners();
    void resume_listeners();

    std::vector<UniqueFd> listeners_;
    std::vector<int> tls_listeners_; // a few fds: a linear search per accept is cheapest
    std::vector<int> h2c_listeners_; // the same for h2c://
    std::vector<Reactor*> reactors_;
    std::vector<bool> woken_; // reactors handed a socket since the last wake_reactors()
    Balancer balancer_;
    Admission admission_;
    AcceptorOptions options_;
    UniqueFd epoll_fd_, wake_fd_, pause_timer_fd_, reserve_fd_;
    std::atomic<bool> stop_requested_{false};
    std::mutex changes_mutex_;
    ListenerChange changes_;
    bool paused_ = false;
    uint64_t last_emfile_log_ms_ = 0;
    uint64_t emfile_since_log_ = 0;
};

} // namespace lepus
