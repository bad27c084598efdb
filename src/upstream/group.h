// Group: the backends of one site on one reactor (a Pool each), and how a
// request picks one: weighted round robin (nginx's smooth one, the default),
// least connections (this reactor's requests in flight per weight), or
// consistent hashing of a key (the client's address, a header or a cookie:
// nginx's `hash ... consistent`, Caddy's lb_policy), for sticky sessions.
// A backend that refused a connection lately (Pool::down_until_ms) is passed
// over while another is available; the hash then takes the next backend on
// its ring, so only that backend's keys move. A backend back in after being
// out is eased in over `slow_start` (nginx Plus's and HAProxy's slowstart):
// round robin and least connections weigh it from almost nothing up to its
// weight, so a backend that just restarted (cold caches, a php-fpm spawning
// children) is not flooded with its whole share at once.
#pragma once

#include "http/exchange.h"
#include "upstream/pool.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lepus::upstream {

enum class Balance : uint8_t { RoundRobin, LeastConn, Hash };

// What `hash` hashes: "client" (the address, after --real-ip-from),
// "header:NAME" or "cookie:NAME".
struct HashKey {
    enum class Source : uint8_t { Client, Header, Cookie };
    Source source = Source::Client;
    std::string name;
};

// A site's `balance`, `hash_key` and `weights` (one per address; empty: all
// 1), and when a backend is passed over: `max_fails` failures within
// `fail_timeout` (PoolOptions, which these fill).
struct Balancing {
    Balance balance = Balance::RoundRobin;
    HashKey key;
    std::vector<unsigned> weights;
    unsigned max_fails = 1;
    uint64_t fail_timeout_ms = 10000;
    // `slow_start`: how long a backend back in takes to reach its weight (0: at once).
    uint64_t slow_start_ms = 10000;
    // `health = { path, interval, fails, passes }` (PoolOptions' health_*).
    std::string health_path;
    uint64_t health_interval_ms = 0;
    unsigned health_fails = 2, health_passes = 2;
};

// Copies the passive and active health settings of `balancing` into `options`.
void apply_health(const Balancing& balancing, PoolOptions& options);

// "round_robin", "least_conn" or "hash"; nullopt for anything else.
std::optional<Balance> parse_balance(std::string_view text);
// "client", "header:NAME" or "cookie:NAME" (NAME not empty); nullopt for anything else.
std::optional<HashKey> parse_hash_key(std::string_view text);

class Group {
public:
    // `pools` not empty; `balancing.weights` empty or one per pool, each >= 1.
    Group(std::vector<std::shared_ptr<Pool>> pools, Balancing balancing);

    size_t size() const { return pools_.size(); }
    const std::vector<std::shared_ptr<Pool>>& pools() const { return pools_; }
    Balance balance() const { return balancing_.balance; }
    // The request's hash key (appended to `out`); empty without `hash`, or when
    // the request has no such header or cookie (then it is balanced round robin).
    void key_of(const Exchange& exchange, std::string& out) const {
        if (balancing_.balance == Balance::Hash) hash_key_of(exchange, out);
    }
    // The backend for a request with hash key `key`: not `skip` (a backend
    // that just failed it) nor one that is down, while another is available.
    // (Inline: most sites have one backend, asked on every request.)
    Pool& pick(uint64_t now_ms, std::string_view key, const Pool* skip = nullptr) {
        return pools_.size() == 1 ? *pools_[0] : pick_among(now_ms, key, skip);
    }

private:
    void hash_key_of(const Exchange& exchange, std::string& out) const;
    Pool& pick_among(uint64_t now_ms, std::string_view key, const Pool* skip);
    bool available(size_t member, uint64_t now_ms, const Pool* skip) const;
    // The member's weight now, in 1/kWeightScale: less while it is eased in.
    int64_t weight_now(size_t member, uint64_t now_ms) const;
    std::optional<size_t> round_robin(uint64_t now_ms, const Pool* skip);
    std::optional<size_t> least_connections(uint64_t now_ms, const Pool* skip);
    std::optional<size_t> hashed(std::string_view key, uint64_t now_ms, const Pool* skip);
    void build_ring();

    std::vector<std::shared_ptr<Pool>> pools_;
    Balancing balancing_;
    std::vector<int64_t> current_; // smooth weighted round robin's running weights
    size_t next_ = 0;              // where ties and the all-down fallback start
    // Consistent hashing: (point, member), sorted by point; points come from
    // the backend's address, so adding a backend moves only the keys it takes.
    std::vector<std::pair<uint32_t, uint32_t>> ring_;
};

} // namespace lepus::upstream
