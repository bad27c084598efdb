// Poller: the readiness engine under a Reactor, chosen by --io.
//
// epoll (the default): one edge-triggered epoll set, epoll_ctl(ADD) per fd,
// epoll_wait per round.
// io_uring (liburing): one multishot POLL_ADD per fd, edge-triggered like
// EPOLLET (io_uring poll is edge-triggered unless IORING_POLL_ADD_LEVEL). The
// registration of new fds and the removal of closed ones ride on the ring and
// go to the kernel with the next wait: no syscall of their own.
//
// Both report the same bits (EPOLLIN == POLLIN, ...) and the cookie given at
// add(), so the reactor and everything above it do not know which one runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lepus {

enum class IoBackend : uint8_t { Epoll, Uring };

const char* io_backend_name(IoBackend backend);
std::optional<IoBackend> parse_io_backend(std::string_view text);

// Whether this kernel lets lepus use io_uring as it needs it (multishot poll and
// accept: Linux 5.19). False with the reason (seccomp, sysctl
// kernel.io_uring_disabled, an old kernel) in `why`.
bool io_uring_usable(std::string& why);

struct ReadyEvent {
    uint64_t cookie = 0;
    uint32_t events = 0; // EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLERR, EPOLLHUP
};

class Poller {
public:
    virtual ~Poller() = default;
    // Watches `fd` edge-triggered for `events` (EPOLLIN | EPOLLOUT | ...);
    // `cookie` comes back with every event. One line in `error` on failure.
    virtual bool add(int fd, uint32_t events, uint64_t cookie, std::string& error) = 0;
    // Stops watching `fd` (added with `cookie`). With `closing`, the caller closes
    // fd right after and the backend may rely on the close (epoll does).
    virtual void remove(int fd, uint64_t cookie, bool closing) = 0;
    // Hands queued registrations to the kernel and waits up to `timeout_ms`
    // (-1: no limit, 0: do not block) for events. Returns how many were stored
    // in `out`, or -1 with errno set (EINTR: call again).
    virtual int wait(std::span<ReadyEvent> out, int timeout_ms) = 0;
    virtual IoBackend backend() const = 0;
    // Called once on the thread that will call wait(), before the first wait.
    virtual void attach_thread() {}
};

// A poller of the given kind; nullptr with one line in `error` on failure.
std::unique_ptr<Poller> make_poller(IoBackend backend, std::string& error);

} // namespace lepus
