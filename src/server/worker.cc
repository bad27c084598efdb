#include "server/worker.h"

#include "server/client_connection.h"

namespace lepus {
namespace {

Http1Options http1_options(const ServerOptions& options) {
    Http1Options http1;
    http1.keepalive_timeout_ms = options.keepalive_timeout_ms;
    http1.header_timeout_ms = options.header_timeout_ms;
    http1.body_timeout_ms = options.body_timeout_ms;
    http1.send_timeout_ms = options.send_timeout_ms;
    http1.min_body_rate = options.min_body_rate;
    http1.max_body_size = options.max_body_size;
    http1.keepalive_requests = options.keepalive_requests;
    http1.http2 = options.http2;
    http1.h2c = options.h2c;
    http1.h2c_sendfile = options.h2c_sendfile;
    return http1;
}

} // namespace

Worker::Worker(const WorkerShared& shared, const ReactorOptions& reactor_options, ReactorLoad& load,
               std::atomic<int64_t>& live_total)
    : shared_(shared),
      reactor_(reactor_options, load, live_total, &Worker::accept_connection, this),
      http1_options_(http1_options(shared.options)), states_(http1_options_),
      router_(*this, shared.options), http1_{router_, states_, reactor_.clock(), http1_options_,
                                             &stats_.phases},
      retire_timer_(this, &Worker::on_retire_timer) {}

Worker::~Worker() {
    // The reactor's loop has ended: nothing can fire any more, and the pools
    // only give their fds back.
    exiting_ = true;
    quic_endpoints_.clear(); // their exchanges end while the serving set still lives
    serving_.reset();
    retired_.clear();
    delete pending_.exchange(nullptr);
}

void Worker::accept_connection(Reactor&, const AcceptedSocket& socket, void* worker) {
    ClientConnection::open(*static_cast<Worker*>(worker), socket);
}

void Worker::take_pending() {
    ServingSet* next = pending_.exchange(nullptr, std::memory_order_acquire);
    if (!next) return;
    // Pools are made here, on the reactor thread that runs them.
    adopt_pools(*next, serving_.get(), reactor_, fastcgi_gauges_, &proxy_gauges_);
    serving_ = std::shared_ptr<ServingSet>(next, [this](ServingSet* set) { retire(set); });
}

void Worker::retire(ServingSet* set) {
    if (exiting_) {
        delete set;
        return;
    }
    retired_.emplace_back(set);
    // Due now: fires at the reactor's next expire(), outside any handler.
    if (!retire_timer_.scheduled()) reactor_.timers().schedule(retire_timer_, reactor_.now_ms());
}

void Worker::on_retire_timer(TimerEntry& entry) {
    Worker& worker = OwnedTimerEntry<Worker>::owner_of(entry);
    std::vector<std::unique_ptr<ServingSet>> sets;
    sets.swap(worker.retired_);
    for (auto& set : sets) {
        // One at a time: a pool shared by two retired sets is closed with the last.
        close_unshared_pools(*set);
        set.reset();
    }
}

void Worker::publish_cache_stats() {
    uint64_t hits = serving_->root.files->cache_hits();
    uint64_t misses = serving_->root.files->cache_misses();
    for (auto& site : serving_->site_handlers)
        hits += site.files->cache_hits(), misses += site.files->cache_misses();
    stats_.cache_hits.store(hits, std::memory_order_relaxed);
    stats_.cache_misses.store(misses, std::memory_order_relaxed);
}

QuicEndpoint* Worker::add_quic_endpoint(UniqueFd fd, const QuicTlsContext& tls) {
    auto endpoint = std::make_unique<QuicEndpoint>(
        reactor_, std::move(fd), tls,
        [this](QuicConnection& connection) -> std::unique_ptr<QuicApplication> {
            return std::make_unique<Http3Engine>(http1_, connection, &stats_.http3);
        },
        stats_.quic);
    if (!endpoint->start()) return nullptr;
    quic_endpoints_.push_back(std::move(endpoint));
    return quic_endpoints_.back().get();
}

} // namespace lepus
