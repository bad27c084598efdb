// Uring: one liburing ring, owned like a descriptor (RAII), for the reactor's
// io_uring poller and the acceptor's multishot accept.
#pragma once

#include <cstdint>
#include <liburing.h>
#include <string>

namespace lepus {

class Uring {
public:
    Uring() = default;
    ~Uring();
    Uring(const Uring&) = delete;
    Uring& operator=(const Uring&) = delete;

    // A ring of `entries` submissions and `cq_entries` completions (the
    // completion queue is the larger: one poll request yields many events),
    // with the IORING_SETUP_* `flags`.
    bool init(unsigned entries, unsigned cq_entries, std::string& error, unsigned flags = 0);
    io_uring* get() { return &ring_; }
    // A free submission entry; submits the queued ones first when the queue is full.
    io_uring_sqe* next_sqe();

private:
    io_uring ring_{};
    bool initialised_ = false;
};

} // namespace lepus
