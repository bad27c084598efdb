// Balancer: chooses the reactor for each new connection.
//
// Connection counts alone are a poor signal for HTTP/1.1: a reactor holding
// many idle keepalive connections is less busy than one with a few clients
// pipelining flat out, and a round-robin split lets long-lived connections pile
// up on whichever core got unlucky. So each reactor publishes two counters and
// the acceptor weighs both.
//
// Score of reactor i (lowest wins), recomputed on every pick:
//
//     score_i = live_i + weight * live_sum * rate_i / rate_sum
//
//   live_i   = live_connections_i + in_flight_i, where in_flight_i is the
//              number of connections this balancer assigned to i that the
//              reactor has not yet taken from its ring (assigned_i minus
//              accepted_total_i). A burst of accepts thus spreads out even
//              before any reactor has run.
//   rate_i   = requests per second over the last intervals: every
//              interval_ms, the delta of requests_total_i divided by the elapsed
//              time, smoothed as rate = smoothing * sample + (1 - smoothing) * rate.
//   live_sum, rate_sum = the sums over all reactors; the throughput term is
//              reactor i's share of the recent requests expressed in
//              connections (0 when rate_sum is 0), so both terms have one unit
//              and `weight` is dimensionless (0 = count connections only).
//
// Ties (exactly equal scores) go to the first reactor at or after a cursor
// that moves past each pick, i.e. round-robin among equals.
//
// Threads: ReactorLoad counters are written by their reactor and read here
// with relaxed/acquire loads; a Balancer is used by the acceptor thread only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lepus {

// One per reactor, on its own cache line so reactors do not false-share.
struct alignas(64) ReactorLoad {
    // Connections the reactor currently owns (reactor stores, relaxed).
    std::atomic<uint32_t> live_connections{0};
    // Requests served, monotonic (reactor adds 1 per request, relaxed).
    std::atomic<uint64_t> requests_total{0};
    // Connections the reactor has taken out of its ring, monotonic. The reactor
    // must update live_connections first, then add 1 here with release order,
    // so the balancer never counts a connection both in flight and live.
    std::atomic<uint64_t> accepted_total{0};
};

struct BalancerOptions {
    double throughput_weight = 1.0; // `weight` in the score
    uint64_t interval_ms = 100;     // how often rates are re-sampled
    double smoothing = 0.5;         // weight of the newest sample in the rate
};

class Balancer {
public:
    // `loads` (one per reactor, at least one) must outlive the balancer.
    explicit Balancer(std::span<ReactorLoad> loads, const BalancerOptions& options = {});

    // Index of the reactor for the next connection; counts it as in flight there.
    size_t pick(uint64_t now_ms);
    // The connection picked for `from` was handed to `to` instead (its ring was full).
    void reassign(size_t from, size_t to);
    // The connection picked for `reactor` was not handed to any reactor after all.
    void unpick(size_t reactor);

    // Smoothed requests per second of `reactor` as of the last interval.
    double rate(size_t reactor) const { return reactors_[reactor].rate; }
    // Connections assigned to `reactor` that it has not yet taken from its ring.
    uint64_t in_flight(size_t reactor) const;

private:
    struct Tracked {
        uint64_t assigned = 0;      // connections this balancer gave the reactor
        uint64_t last_requests = 0; // requests_total at the last sample
        double rate = 0;            // smoothed requests per second
        double live = 0;            // scratch for pick()
    };

    void sample_rates(uint64_t now_ms);

    std::span<ReactorLoad> loads_;
    BalancerOptions options_;
    std::vector<Tracked> reactors_;
    uint64_t last_sample_ms_ = 0;
    bool sampled_ = false;
    size_t cursor_ = 0;
};

} // namespace lepus
