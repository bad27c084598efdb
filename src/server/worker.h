// Worker: one reactor thread and everything it owns: its Reactor, the HTTP/1.1
// engines' shared context (options, pooled request states), the Router, the
// serving set (static handlers, FastCGI script resolvers and backend pools, per
// site) and the counters of the status page. Everything here is touched by that
// thread only, except reload() and the counters.
#pragma once

#include "fastcgi/upstream.h"
#include "http/http1_engine.h"
#include "http/http2_engine.h"
#include "http/http3_engine.h"
#include "log/async_logger.h"
#include "net/quic_endpoint.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "server/client_table.h"
#include "server/options.h"
#include "server/router.h"
#include "server/serving_set.h"

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace lepus {

// Counters of one worker for the status page. Only the worker's thread writes
// them (load + store, no locked instruction); any thread may read them.
struct WorkerStats {
    std::atomic<uint64_t> requests{0}, bytes_sent{0};
    PhaseGauges phases; // connections reading and writing
    Http2Gauges http2;  // HTTP/2 connections and streams
    Http3Gauges http3;  // HTTP/3 streams
    QuicGauges quic;    // QUIC connections and packets
    std::atomic<uint64_t> cache_hits{0}, cache_misses{0};
    std::array<std::atomic<uint64_t>, 600> responses{}; // by status code

    static void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
};

// What every worker of a server shares.
struct WorkerShared {
    const ServerOptions& options;
    AsyncLogger& access_log;             // the global access log
    const std::vector<Worker*>& workers; // every worker, for the status page (read-only use)
    uint64_t started_ms = 0;             // for the status page's uptime
    ClientTable* clients = nullptr;      // the limits' per-client state
};

class Worker {
public:
    // Makes the worker and its reactor (not yet initialised: see init()).
    Worker(const WorkerShared& shared, const ReactorOptions& reactor_options, ReactorLoad& load,
           std::atomic<int64_t>& live_total);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Creates the reactor's poller, eventfd and timerfd. One line in `error` on failure.
    bool init(std::string& error) { return reactor_.init(error); }

    Reactor& reactor() { return reactor_; }
    const ServerOptions& options() const { return shared_.options; }
    const WorkerShared& shared() const { return shared_; }
    AsyncLogger& access_log() { return shared_.access_log; }
    const Http1Context& http1() const { return http1_; }
    WorkerStats& stats() { return stats_; }
    // FastCGI connections and queue of every pool of this reactor, for the status page.
    upstream::UpstreamGauges& fastcgi_gauges() { return fastcgi_gauges_; }
    // The same for the reverse proxy's HTTP backend pools.
    upstream::UpstreamGauges& proxy_gauges() { return proxy_gauges_; }

    // The current serving set; picks up one handed over by reload() first.
    const std::shared_ptr<ServingSet>& serving() {
        if (pending_.load(std::memory_order_relaxed)) take_pending();
        return serving_;
    }
    // Any thread (SIGHUP; before the reactor runs, the first set): hands over a
    // new set; the worker takes it at its next request, or at its next turn
    // (its pools' active health checks start then, with or without traffic).
    void reload(std::unique_ptr<ServingSet> set) {
        delete pending_.exchange(set.release(), std::memory_order_acq_rel);
        reactor_.post([this] { serving(); });
    }
    // Copies the open-file cache counters of every handler into stats().
    void publish_cache_stats();
    // Before the reactor runs: serves HTTP/3 on `fd`, this reactor's UDP
    // socket of a quic:// listener; null when the socket cannot be registered.
    QuicEndpoint* add_quic_endpoint(UniqueFd fd, const QuicTlsContext& tls);

private:
    static void accept_connection(Reactor& reactor, const AcceptedSocket& socket, void* worker);
    void take_pending();
    // The deleter of serving_: a set no request holds any more is destroyed
    // from a timer callback, never from inside the request or pool callbacks
    // that dropped the last reference (its pools may be on the stack there).
    void retire(ServingSet* set);
    static void on_retire_timer(TimerEntry& entry);

    WorkerShared shared_;
    Reactor reactor_;
    WorkerStats stats_; // before http1_, which points at its gauges
    Http1Options http1_options_;
    Http1StatePool states_;
    Router router_;
    Http1Context http1_;
    upstream::UpstreamGauges fastcgi_gauges_; // before the sets: their pools write to it
    upstream::UpstreamGauges proxy_gauges_;
    std::shared_ptr<ServingSet> serving_;
    std::atomic<ServingSet*> pending_{nullptr};
    std::vector<std::unique_ptr<ServingSet>> retired_;
    OwnedTimerEntry<Worker> retire_timer_;
    bool exiting_ = false; // ~Worker: the reactor is gone, sets are destroyed at once
    std::vector<std::unique_ptr<QuicEndpoint>> quic_endpoints_;
};

} // namespace lepus
