// What happens to a freshly accepted socket, the same whichever loop accepted
// it (the acceptor thread, or a reactor's own listener with --accept
// reuseport): one accept call, the --max-connections check and the short 503
// for a newcomer over the limit.
#pragma once

#include "net/reactor.h"

#include <atomic>
#include <cstdint>

namespace lepus {

// accept4 on a non-blocking listener (retrying EINTR and ECONNABORTED):
// true with `socket` filled, false with errno set (EAGAIN: the backlog is empty).
bool accept_one(int listener, AcceptedSocket& socket);

class Admission {
public:
    // `max_connections` 0: unlimited.
    Admission(std::atomic<int64_t>& live_total, int64_t max_connections)
        : live_total_(live_total), max_connections_(max_connections) {}

    // Counts `socket` as live. Over the limit: answers 503 with Retry-After
    // (a TLS socket: nothing, it could not read it), closes it and returns
    // false. (Its options, TCP_NODELAY, are inherited from the listener.)
    bool admit(AcceptedSocket& socket);
    // An admitted socket that no reactor could take: uncounted, answered 503, closed.
    void refuse_admitted(int fd, bool tls);

    uint64_t accepted() const { return accepted_.load(std::memory_order_relaxed); }
    uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

private:
    void refuse(int fd, bool tls);

    std::atomic<int64_t>& live_total_;
    int64_t max_connections_;
    std::atomic<uint64_t> accepted_{0}, refused_{0};
};

} // namespace lepus
