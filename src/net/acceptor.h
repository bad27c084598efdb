// Acceptor: the thread that owns the listening sockets, accepts until EAGAIN
// and hands each connection to a reactor chosen by the Balancer.
//
// Running out of descriptors (EMFILE/ENFILE) must not busy-loop: the acceptor
// keeps one reserve fd to accept-and-close the newcomer (so it is not left
// waiting in the backlog), then stops watching the listeners for a back-off
// period on a timerfd, because the reserve-fd trick alone still spins when the
// backlog refills at once (libuv#690). Above --max-connections a newcomer gets
// a short 503 and is closed.
#pragma once

#include "base/unique_fd.h"
#include "net/balancer.h"
#include "net/reactor.h"

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lepus {

struct AcceptorOptions {
    int64_t max_connections = 0; // 0: unlimited
    uint32_t emfile_pause_ms = 200;
};

class Acceptor {
public:
    Acceptor(std::vector<UniqueFd> listeners, std::span<Reactor* const> reactors,
             std::span<ReactorLoad> loads, std::atomic<int64_t>& live_total,
             const AcceptorOptions& options);

    bool init(std::string& error);
    // Accepts until request_stop(); closes the listening sockets before returning.
    void run();
    // Any thread.
    void request_stop();

    uint64_t accepted() const { return accepted_.load(std::memory_order_relaxed); }
    uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

private:
    void accept_ready(int listener);
    bool dispatch(const AcceptedSocket& socket, std::vector<bool>& woken);
    void pause_listeners();
    void resume_listeners();
    void refuse_over_limit(int fd);

    std::vector<UniqueFd> listeners_;
    std::vector<Reactor*> reactors_;
    Balancer balancer_;
    std::atomic<int64_t>& live_total_;
    AcceptorOptions options_;
    UniqueFd epoll_fd_, stop_fd_, pause_timer_fd_, reserve_fd_;
    bool paused_ = false;
    uint64_t last_emfile_log_ms_ = 0;
    uint64_t emfile_since_log_ = 0;
    std::atomic<uint64_t> accepted_{0}, refused_{0};
};

} // namespace lepus
