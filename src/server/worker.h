// Worker: what one reactor thread owns besides its Reactor: the static file
// handler, the FastCGI script resolver and backend pool (when --fastcgi is
// set), the pool of per-request state, the access log scratch space.
// Everything here is touched by that thread only.
#pragma once

#include "fastcgi/script_resolver.h"
#include "fastcgi/upstream.h"
#include "http/chunked_decoder.h"
#include "http/request_parser.h"
#include "http/response.h"
#include "http/static_handler.h"
#include "log/async_logger.h"
#include "net/reactor.h"
#include "server/options.h"
#include "server/site_table.h"

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

// What a worker serves with: the handler of the default root and, with
// [[site]] blocks, one handler per site. SIGHUP builds a new set for every
// worker; a worker switches at its next request, and a response in flight keeps
// the set it started with alive until it is sent.
struct ServingSet {
    std::unique_ptr<StaticHandler> root;
    std::shared_ptr<const SiteTable> sites; // null without [[site]] blocks
    std::vector<std::unique_ptr<StaticHandler>> site_files;
};

class Worker {
public:
    Worker(const ServerOptions& options, AsyncLogger& access_log)
        : options_(options), access_log_(access_log) {}

    // Pooled request state: reused, so the keepalive path does not allocate.
    std::unique_ptr<RequestState> acquire_state();
    void release_state(std::unique_ptr<RequestState> state);

    const ServerOptions& options() const { return options_; }
    AsyncLogger& access_log() { return access_log_; }
    std::string& log_line() { return log_line_; }
    // The current serving set; picks up one handed over by reload() first.
    const std::shared_ptr<ServingSet>& serving() {
        if (pending_.load(std::memory_order_relaxed)) {
            if (ServingSet* next = pending_.exchange(nullptr, std::memory_order_acquire))
                serving_.reset(next);
        }
        return serving_;
    }
    // Before the reactor runs: the first set.
    void set_serving(std::unique_ptr<ServingSet> set) { serving_ = std::move(set); }
    // Any thread (SIGHUP): hands over a new set; the worker takes it at its next request.
    void reload(std::unique_ptr<ServingSet> set) {
        delete pending_.exchange(set.release(), std::memory_order_acq_rel);
    }
    ~Worker() { delete pending_.load(); }
    // FastCGI; both null when --fastcgi is not set.
    fastcgi::ScriptResolver* scripts() { return scripts_.get(); }
    fastcgi::UpstreamPool* upstream_pool() { return upstream_pool_.get(); }
    void set_fastcgi(std::unique_ptr<fastcgi::ScriptResolver> scripts,
                     std::unique_ptr<fastcgi::UpstreamPool> pool) {
        scripts_ = std::move(scripts);
        upstream_pool_ = std::move(pool);
    }

    WorkerStats& stats() { return stats_; }
    // Copies the open-file cache counters of every handler into stats().
    void publish_cache_stats() {
        uint64_t hits = serving_->root->cache_hits();
        uint64_t misses = serving_->root->cache_misses();
        for (auto& handler : serving_->site_files)
            hits += handler->cache_hits(), misses += handler->cache_misses();
        stats_.cache_hits.store(hits, std::memory_order_relaxed);
        stats_.cache_misses.store(misses, std::memory_order_relaxed);
    }
    // Every worker of the server, for the status page (read-only use).
    const std::vector<Worker*>* all_workers = nullptr;
    uint64_t started_ms = 0;
    Reactor* reactor = nullptr;

private:
    const ServerOptions& options_;
    AsyncLogger& access_log_;
    std::shared_ptr<ServingSet> serving_;
    std::atomic<ServingSet*> pending_{nullptr};
    std::unique_ptr<fastcgi::ScriptResolver> scripts_;
    std::unique_ptr<fastcgi::UpstreamPool> upstream_pool_;
    std::vector<std::unique_ptr<RequestState>> free_states_;
    std::string log_line_;
    WorkerStats stats_;
};

} // namespace lepus
