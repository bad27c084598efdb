// ReusePortListener (in-reactor accept: --accept reuseport, or --accept auto
// when no core is left for an acceptor thread): a SO_REUSEPORT listening
// socket owned by one reactor, which accepts for itself; the kernel spreads
// connections over the reactors by hash instead of the acceptor thread's
// balance of load. Each newcomer goes through the same Admission as the
// acceptor thread's (limits, socket options), then to the reactor's accept
// callback. No thread hop: a connection costs no ring push, no eventfd wake-up
// and no second accept loop.
//
// ReusePortListeners keeps every reactor's listeners by the address text they
// were configured with, so that a SIGHUP can add and drop listen addresses
// while the reactors run (each change is posted to the reactor that owns the
// socket).
#pragma once

#include "base/unique_fd.h"
#include "net/admission.h"
#include "net/reactor.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <sys/epoll.h>
#include <vector>

namespace lepus {

class ReusePortListener final : public EventHandler {
public:
    // `tls`: the connections it accepts speak TLS (an https:// listener);
    // `h2c`: HTTP/2 with prior knowledge only (an h2c:// listener).
    ReusePortListener(Reactor& reactor, UniqueFd fd, std::atomic<int64_t>& live_total,
                      int64_t max_connections, bool tls = false, bool h2c = false)
        : reactor_(reactor), fd_(std::move(fd)), admission_(live_total, max_connections), tls_(tls),
          h2c_(h2c) {}

    // Registers the listener with its reactor (reactor thread, or before it runs).
    bool start() { return reactor_.add(fd_.get(), this, EPOLLIN, false); }
    // Takes it out of its reactor and closes the socket (reactor thread).
    void stop() {
        if (!fd_) return;
        reactor_.remove(fd_.get());
        fd_.reset();
    }

    void on_events(uint32_t events) override;
    void on_shutdown() override {}
    void on_force_close() override {}
    // SIGTERM: closed at once, as the acceptor thread closes its listeners, so
    // the kernel stops queueing connections for a reactor that is leaving.
    void on_stop_accepting() override { stop(); }

private:
    Reactor& reactor_;
    UniqueFd fd_;
    Admission admission_;
    bool tls_;
    bool h2c_;
};

class ReusePortListeners {
public:
    ReusePortListeners(std::vector<Reactor*> reactors, std::atomic<int64_t>& live_total,
                       int64_t max_connections)
        : reactors_(std::move(reactors)), per_reactor_(reactors_.size()), live_total_(live_total),
          max_connections_(max_connections) {}

    size_t reactors() const { return reactors_.size(); }
    // Before the reactors run: `fds` holds one socket per reactor, bound to the
    // same address with SO_REUSEPORT.
    void start(const std::string& text, std::vector<UniqueFd> fds, bool tls, bool h2c);
    // While they run (SIGHUP): the same, each reactor's part posted to it.
    void add_running(const std::string& text, std::vector<UniqueFd> fds, bool tls, bool h2c);
    // While they run: every reactor closes its socket of `text`.
    void remove_running(const std::string& text);

private:
    // shared_ptr: a listener made on the SIGHUP thread travels to its reactor
    // inside a std::function, which must be copyable.
    using Owned = std::map<std::string, std::shared_ptr<ReusePortListener>>;
    std::shared_ptr<ReusePortListener> make(size_t reactor, UniqueFd fd, bool tls, bool h2c);

    std::vector<Reactor*> reactors_;
    // Each map is touched by its reactor's thread only once the reactors run.
    std::vector<Owned> per_reactor_;
    std::atomic<int64_t>& live_total_;
    int64_t max_connections_;
};

} // namespace lepus
