#include "server/worker.h"

namespace lepus {
namespace {
// Enough for every connection that is mid-request at once on a busy reactor;
// beyond it states are freed rather than hoarded.
constexpr size_t kMaxPooledStates = 1024;
} // namespace

std::unique_ptr<RequestState> Worker::acquire_state() {
    if (free_states_.empty()) return std::make_unique<RequestState>();
    auto state = std::move(free_states_.back());
    free_states_.pop_back();
    return state;
}

void Worker::release_state(std::unique_ptr<RequestState> state) {
    state->parser.reset();
    state->response.reset();
    state->error_page.reset();
    state->site = nullptr;
    state->input_begin = state->input_end = 0;
    // A large POST or response must not stay pinned in the pool.
    if (state->fastcgi_body.capacity() > 64 * 1024) std::string().swap(state->fastcgi_body);
    if (state->proxy_out.capacity() > 128 * 1024) std::string().swap(state->proxy_out);
    state->proxy_out.clear();
    state->proxy_sent = 0;
    if (free_states_.size() < kMaxPooledStates) free_states_.push_back(std::move(state));
}

Worker::~Worker() {
    // The reactor is gone (or its loop has ended): nothing can fire any more,
    // and the pools only give their fds back.
    exiting_ = true;
    serving_.reset();
    retired_.clear();
    delete pending_.exchange(nullptr);
}

void Worker::take_pending() {
    ServingSet* next = pending_.exchange(nullptr, std::memory_order_acquire);
    if (!next) return;
    // Pools are made here, on the reactor thread that runs them.
    adopt_pools(*next, serving_.get(), *reactor, fastcgi_gauges_);
    serving_ = std::shared_ptr<ServingSet>(next, [this](ServingSet* set) { retire(set); });
}

void Worker::retire(ServingSet* set) {
    if (exiting_) {
        delete set;
        return;
    }
    retired_.emplace_back(set);
    // Due now: fires at the reactor's next expire(), outside any handler.
    if (!retire_timer_.scheduled()) reactor->timers().schedule(retire_timer_, reactor->now_ms());
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

} // namespace lepus
