#include "upstream/group.h"

#include "base/ascii.h"

#include <algorithm>

namespace lepus::upstream {
namespace {

// Points on the ring per unit of weight, as nginx's `hash ... consistent` (ketama).
constexpr unsigned kPointsPerWeight = 160;
// Weights are counted in these parts, so that a backend eased in starts at a
// small fraction of weight 1.
constexpr int64_t kWeightScale = 100;

// FNV-1a, then a 64-bit finaliser (MurmurHash3's fmix64) so that keys that
// differ in one byte land far apart; the top 32 bits are the point.
uint32_t hash32(std::string_view text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return uint32_t(h >> 32);
}

// The value of cookie `name` in a Cookie field ("a=1; b=2", RFC 6265 §4.2.1).
std::string_view cookie_value(std::string_view cookies, std::string_view name) {
    while (!cookies.empty()) {
        size_t end = cookies.find(';');
        std::string_view pair = trim_ows(cookies.substr(0, end));
        cookies.remove_prefix(end == std::string_view::npos ? cookies.size() : end + 1);
        size_t equals = pair.find('=');
        if (equals != std::string_view::npos && pair.substr(0, equals) == name)
            return pair.substr(equals + 1);
    }
    return {};
}

} // namespace

void apply_health(const Balancing& balancing, PoolOptions& options) {
    options.max_fails = balancing.max_fails;
    options.fail_timeout_ms = balancing.fail_timeout_ms;
    options.health_path = balancing.health_path;
    options.health_interval_ms = balancing.health_interval_ms;
    options.health_fails = balancing.health_fails;
    options.health_passes = balancing.health_passes;
}

std::optional<Balance> parse_balance(std::string_view text) {
    if (text == "round_robin") return Balance::RoundRobin;
    if (text == "least_conn") return Balance::LeastConn;
    if (text == "hash") return Balance::Hash;
    return std::nullopt;
}

std::optional<HashKey> parse_hash_key(std::string_view text) {
    HashKey key;
    if (text == "client") return key;
    if (text.starts_with("header:") && text.size() > 7) {
        key.source = HashKey::Source::Header;
        key.name = text.substr(7);
        return key;
    }
    if (text.starts_with("cookie:") && text.size() > 7) {
        key.source = HashKey::Source::Cookie;
        key.name = text.substr(7);
        return key;
    }
    return std::nullopt;
}

Group::Group(std::vector<std::shared_ptr<Pool>> pools, Balancing balancing)
    : pools_(std::move(pools)), balancing_(std::move(balancing)), current_(pools_.size(), 0) {
    balancing_.weights.resize(pools_.size(), 1);
    if (balancing_.balance == Balance::Hash) build_ring();
}

void Group::build_ring() {
    std::string point;
    for (size_t member = 0; member < pools_.size(); ++member) {
        const std::string& address = pools_[member]->options().address.text;
        unsigned points = kPointsPerWeight * std::max(1u, balancing_.weights[member]);
        for (unsigned i = 0; i < points; ++i) {
            point.assign(address).append("-").append(std::to_string(i));
            ring_.emplace_back(hash32(point), uint32_t(member));
        }
    }
    std::sort(ring_.begin(), ring_.end());
}

void Group::hash_key_of(const Exchange& exchange, std::string& out) const {
    const HashKey& key = balancing_.key;
    if (key.source == HashKey::Source::Client) return exchange.client.format_host(out);
    // Both sides views: a std::string on one side would make the other a
    // temporary string, gone at the end of this line.
    std::string_view wanted = key.source == HashKey::Source::Header ? std::string_view(key.name)
                                                                    : std::string_view("Cookie");
    for (const Header& header : exchange.request->headers) {
        if (!ascii_iequals(header.name, wanted)) continue;
        if (key.source == HashKey::Source::Header) return void(out.append(header.value));
        std::string_view value = cookie_value(header.value, key.name);
        if (!value.empty()) return void(out.append(value));
    }
}

bool Group::available(size_t member, uint64_t now_ms, const Pool* skip) const {
    const Pool& pool = *pools_[member];
    return &pool != skip && pool.down_until_ms <= now_ms;
}

// Linear from 1 part at the moment it is back to its whole weight after
// slow_start_ms (nginx Plus's slow_start).
int64_t Group::weight_now(size_t member, uint64_t now_ms) const {
    int64_t full = int64_t(balancing_.weights[member]) * kWeightScale;
    uint64_t since = pools_[member]->back_since_ms, ramp = balancing_.slow_start_ms;
    if (ramp == 0 || since == 0 || now_ms >= since + ramp) return full;
    uint64_t elapsed = now_ms > since ? now_ms - since : 0;
    return std::max<int64_t>(1, full * int64_t(elapsed) / int64_t(ramp));
}

Pool& Group::pick_among(uint64_t now_ms, std::string_view key, const Pool* skip) {
    std::optional<size_t> member;
    if (balancing_.balance == Balance::Hash && !key.empty())
        member = hashed(key, now_ms, skip);
    else if (balancing_.balance == Balance::LeastConn)
        member = least_connections(now_ms, skip);
    else
        member = round_robin(now_ms, skip);
    if (member) return *pools_[*member];
    // Every backend failed lately: try them in turn all the same (one may be
    // back), `skip` last.
    size_t count = pools_.size();
    size_t index = next_++ % count;
    if (pools_[index].get() == skip) index = next_++ % count;
    return *pools_[index];
}

// nginx's smooth weighted round robin (ngx_http_upstream_get_peer): each
// available backend gains its weight, the one ahead is taken and pays the
// total back, so weights 5,1,1 give a a b a c a a, not a a a a a b c.
std::optional<size_t> Group::round_robin(uint64_t now_ms, const Pool* skip) {
    std::optional<size_t> best;
    int64_t total = 0;
    for (size_t member = 0; member < pools_.size(); ++member) {
        if (!available(member, now_ms, skip)) continue;
        int64_t weight = weight_now(member, now_ms);
        current_[member] += weight;
        total += weight;
        if (!best || current_[member] > current_[*best]) best = member;
    }
    if (best) current_[*best] -= total;
    return best;
}

// The fewest requests in flight (busy connections and waiters) for its
// weight; ties go round robin, so that an idle group still spreads. One
// eased in counts its load against its present weight.
std::optional<size_t> Group::least_connections(uint64_t now_ms, const Pool* skip) {
    std::optional<size_t> best;
    uint64_t best_load = 0, best_weight = 1;
    size_t count = pools_.size(), start = next_++ % count;
    for (size_t i = 0; i < count; ++i) {
        size_t member = (start + i) % count;
        if (!available(member, now_ms, skip)) continue;
        const Pool& pool = *pools_[member];
        uint64_t load = pool.busy_connections() + pool.queued(),
                 weight = uint64_t(weight_now(member, now_ms));
        // The load with this request, so that weights (and an eased-in
        // backend's small one) count when nothing is in flight too.
        if (!best || (load + 1) * best_weight < (best_load + 1) * weight) {
            best = member;
            best_load = load;
            best_weight = weight;
        }
    }
    return best;
}

// The first point at or after the key's hash, going round; a backend that is
// not available is passed for the next point's.
std::optional<size_t> Group::hashed(std::string_view key, uint64_t now_ms, const Pool* skip) {
    if (ring_.empty()) return std::nullopt;
    uint32_t point = hash32(key);
    auto it = std::lower_bound(ring_.begin(), ring_.end(), std::pair{point, uint32_t{0}});
    size_t start = size_t(it - ring_.begin());
    for (size_t i = 0; i < ring_.size(); ++i) {
        uint32_t member = ring_[(start + i) % ring_.size()].second;
        if (available(member, now_ms, skip)) return member;
    }
    return std::nullopt;
}

} // namespace lepus::upstream
