// ReusePortListener (--accept reuseport): a SO_REUSEPORT listening socket
// owned by one reactor, which accepts for itself; the kernel spreads
// connections over the reactors by hash instead of the acceptor thread's
// balance of load. Each newcomer goes through the same Admission as the
// acceptor thread's (limits, socket options), then to the reactor's accept
// callback. Exists so that lepus-bench can measure it against the acceptor.
#pragma once

#include "base/unique_fd.h"
#include "net/admission.h"
#include "net/reactor.h"

#include <atomic>
#include <sys/epoll.h>

namespace lepus {

class ReusePortListener final : public EventHandler {
public:
    // `tls`: the connections it accepts speak TLS (an https:// listener).
    ReusePortListener(Reactor& reactor, UniqueFd fd, std::atomic<int64_t>& live_total,
                      int64_t max_connections, bool tls = false)
        : reactor_(reactor), fd_(std::move(fd)), admission_(live_total, max_connections),
          tls_(tls) {}

    // Registers the listener with its reactor (reactor thread, or before it runs).
    bool start() { return reactor_.add(fd_.get(), this, EPOLLIN, false); }

    void on_events(uint32_t events) override;
    void on_shutdown() override {}
    void on_force_close() override {}

private:
    Reactor& reactor_;
    UniqueFd fd_;
    Admission admission_;
    bool tls_;
};

} // namespace lepus
