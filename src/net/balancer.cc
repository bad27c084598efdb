#include "net/balancer.h"

namespace lepus {

Balancer::Balancer(std::span<ReactorLoad> loads, const BalancerOptions& options)
    : loads_(loads), options_(options), reactors_(loads.size()) {
    if (options_.interval_ms == 0) options_.interval_ms = 1;
    if (!(options_.smoothing > 0 && options_.smoothing <= 1)) options_.smoothing = 1;
}

size_t Balancer::pick(uint64_t now_ms) {
    const size_t count = reactors_.size();
    if (count <= 1) {
        if (count == 1) ++reactors_[0].assigned;
        return 0;
    }
    if (!sampled_ || now_ms - last_sample_ms_ >= options_.interval_ms) sample_rates(now_ms);

    double live_sum = 0, rate_sum = 0;
    for (size_t i = 0; i < count; ++i) {
        Tracked& reactor = reactors_[i];
        // Acquire: a connection counted in accepted_total is already counted
        // in live_connections (the reactor updates live first).
        const uint64_t accepted = loads_[i].accepted_total.load(std::memory_order_acquire);
        const uint32_t live = loads_[i].live_connections.load(std::memory_order_relaxed);
        // A reactor may have been handed connections we did not record: resync,
        // or its later assignments would be invisible until it caught up.
        if (accepted > reactor.assigned) reactor.assigned = accepted;
        reactor.live = double(live) + double(reactor.assigned - accepted);
        live_sum += reactor.live;
        rate_sum += reactor.rate;
    }
    const double factor = rate_sum > 0 ? options_.throughput_weight * live_sum / rate_sum : 0;

    // Scan from the cursor so that equal scores are served round-robin.
    size_t best = cursor_;
    double best_score = 0;
    for (size_t k = 0; k < count; ++k) {
        size_t i = cursor_ + k;
        if (i >= count) i -= count;
        const double score = reactors_[i].live + factor * reactors_[i].rate;
        if (k == 0 || score < best_score) {
            best = i;
            best_score = score;
        }
    }
    ++reactors_[best].assigned;
    cursor_ = best + 1 == count ? 0 : best + 1;
    return best;
}

void Balancer::reassign(size_t from, size_t to) {
    if (from == to || from >= reactors_.size() || to >= reactors_.size()) return;
    unpick(from);
    ++reactors_[to].assigned;
}

void Balancer::unpick(size_t reactor) {
    if (reactor < reactors_.size() && reactors_[reactor].assigned > 0)
        --reactors_[reactor].assigned;
}

uint64_t Balancer::in_flight(size_t reactor) const {
    const uint64_t accepted = loads_[reactor].accepted_total.load(std::memory_order_acquire);
    const uint64_t assigned = reactors_[reactor].assigned;
    return assigned > accepted ? assigned - accepted : 0;
}

void Balancer::sample_rates(uint64_t now_ms) {
    if (!sampled_ || now_ms < last_sample_ms_) {
        // First call (or a clock that went back): only take a baseline.
        for (size_t i = 0; i < reactors_.size(); ++i)
            reactors_[i].last_requests = loads_[i].requests_total.load(std::memory_order_relaxed);
        last_sample_ms_ = now_ms;
        sampled_ = true;
        return;
    }
    const double elapsed_s = double(now_ms - last_sample_ms_) / 1000.0;
    const double keep = 1 - options_.smoothing;
    for (size_t i = 0; i < reactors_.size(); ++i) {
        Tracked& reactor = reactors_[i];
        const uint64_t total = loads_[i].requests_total.load(std::memory_order_relaxed);
        const double sample = double(total - reactor.last_requests) / elapsed_s;
        reactor.rate = options_.smoothing * sample + keep * reactor.rate;
        reactor.last_requests = total;
    }
    last_sample_ms_ = now_ms;
}

} // namespace lepus
