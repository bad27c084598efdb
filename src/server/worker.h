// Worker: what one reactor thread owns besides its Reactor: the serving set
// (static handlers, FastCGI script resolvers and backend pools, per site), the
// pool of per-request state, the access log scratch space. Everything here is
// touched by that thread only, except reload() and the status counters.
#pragma once

#include "fastcgi/upstream.h"
#include "http/chunked_decoder.h"
#include "http/request_parser.h"
#include "http/response.h"
#include "log/async_logger.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "server/options.h"
#include "server/serving_set.h"

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace lepus {

// The state a connection needs only while a request is in flight. Idle
// keepalive connections hold none, which keeps them a few hundred bytes.
struct RequestState {
    RequestParser parser;
    Response response;
    std::string input; // bytes received; [input_begin, input_end) not yet consumed
    size_t input_begin = 0;
    size_t input_end = 0;
    ChunkedDecoder chunked; // discards a chunked body the handler does not read
    std::string scratch;
    Response error_page; // working space for a per-site error page

    // The site serving this request, in the connection's serving set; null
    // before the head is parsed (the parser's own errors).
    SiteHandlers* site = nullptr;

    // FastCGI: copied from the resolver, which serves other connections while
    // this request waits for a backend connection.
    std::string script_name, path_info, script_filename;
    // A chunked body, decoded and kept whole (bounded by --max-body-size) so
    // that CONTENT_LENGTH can be sent, as nginx does.
    std::string fastcgi_body;
    // What goes to the client: response head, then body (chunk-framed when the
    // backend gave no length); [proxy_sent, size) not yet sent.
    std::string proxy_out;
    size_t proxy_sent = 0;
};

// Counters of one worker for the status page. Only the worker's thread writes
// them (load + store, no locked instruction); any thread may read them.
struct WorkerStats {
    std::atomic<uint64_t> requests{0}, bytes_sent{0}, reading{0}, writing{0};
    std::atomic<uint64_t> cache_hits{0}, cache_misses{0};
    std::array<std::atomic<uint64_t>, 600> responses{}; // by status code

    static void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
    static void drop(std::atomic<uint64_t>& gauge) {
        gauge.store(gauge.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
};

class Worker {
public:
    Worker(const ServerOptions& options, AsyncLogger& access_log)
        : options_(options), access_log_(access_log),
          retire_timer_(this, &Worker::on_retire_timer) {}
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Pooled request state: reused, so the keepalive path does not allocate.
    std::unique_ptr<RequestState> acquire_state();
    void release_state(std::unique_ptr<RequestState> state);

    const ServerOptions& options() const { return options_; }
    AsyncLogger& access_log() { return access_log_; }
    std::string& log_line() { return log_line_; }
    // The current serving set; picks up one handed over by reload() first.
    const std::shared_ptr<ServingSet>& serving() {
        if (pending_.load(std::memory_order_relaxed)) take_pending();
        return serving_;
    }
    // Any thread (SIGHUP; before the reactor runs, the first set): hands over a
    // new set; the worker takes it at its next request. Needs `reactor` set.
    void reload(std::unique_ptr<ServingSet> set) {
        delete pending_.exchange(set.release(), std::memory_order_acq_rel);
    }

    // FastCGI connections and queue of every pool of this reactor, for the status page.
    fastcgi::UpstreamGauges& fastcgi_gauges() { return fastcgi_gauges_; }
    WorkerStats& stats() { return stats_; }
    // Copies the open-file cache counters of every handler into stats().
    void publish_cache_stats();
    // Every worker of the server, for the status page (read-only use).
    const std::vector<Worker*>* all_workers = nullptr;
    uint64_t started_ms = 0;
    Reactor* reactor = nullptr;

private:
    void take_pending();
    // The deleter of serving_: a set no request holds any more is destroyed
    // from a timer callback, never from inside the request or pool callbacks
    // that dropped the last reference (its pools may be on the stack there).
    void retire(ServingSet* set);
    static void on_retire_timer(TimerEntry& entry);

    const ServerOptions& options_;
    AsyncLogger& access_log_;
    fastcgi::UpstreamGauges fastcgi_gauges_; // before the sets: their pools write to it
    std::shared_ptr<ServingSet> serving_;
    std::atomic<ServingSet*> pending_{nullptr};
    std::vector<std::unique_ptr<ServingSet>> retired_;
    OwnedTimerEntry<Worker> retire_timer_;
    bool exiting_ = false; // ~Worker: the reactor is gone, sets are destroyed at once
    std::vector<std::unique_ptr<RequestState>> free_states_;
    std::string log_line_;
    WorkerStats stats_;
};

} // namespace lepus
