// The sharded, memory-bounded client table. See client_table.h.
#include "server/client_table.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sched.h>

namespace lepus {

// 1-based indexes into the shard's array: 0 is "none", so calloc's zeroed
// buckets are empty ones.
struct ClientTable::Entry {
    std::array<uint8_t, 16> address;
    uint32_t zone;
    uint32_t hash;
    uint32_t chain;        // the next entry of the same bucket
    uint32_t newer, older; // the shard's recency list
    uint32_t slots;        // requests in progress (acquire)
    uint64_t last_ms;      // the last request let through (take_request)
    int64_t excess;        // nginx's excess: requests above the rate, in 1/1000
    uint64_t logged_ms;    // the last refusal logged
};
static_assert(sizeof(ClientTable::Key) == 20);

// A shard's lock. The critical sections are a few dozen instructions with no
// system call, and a pthread mutex cost 55 instructions of lock and unlock
// per request (callgrind, keepalive `/` under a limit): a test-and-set lock
// that yields the core after a while (the holder may have been preempted).
class ShardLock {
public:
    void lock() {
        for (unsigned spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
            while (locked_.load(std::memory_order_relaxed))
                if (++spins % 128 == 0) sched_yield();
        }
    }
    void unlock() { locked_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> locked_{false};
};

struct alignas(64) ClientTable::Shard {
    ShardLock mutex;
    Entry* entries = nullptr; // capacity of them, allocated on first use
    uint32_t* buckets = nullptr;
    uint32_t used = 0, newest = 0, oldest = 0;
    std::atomic<uint32_t> size{0};
    std::atomic<uint64_t> evictions{0};

    ~Shard() {
        std::free(entries);
        std::free(buckets);
    }
    Entry& at(uint32_t index) { return entries[index - 1]; }

    // Two 8-byte compares: std::array's == is a memcmp call (27 instructions).
    static bool same_address(const Entry& entry, const Key& key) {
        uint64_t a[2], b[2];
        std::memcpy(a, entry.address.data(), 16);
        std::memcpy(b, key.address.data(), 16);
        return a[0] == b[0] && a[1] == b[1];
    }

    bool allocate(uint32_t capacity) {
        if (entries) return true;
        entries = static_cast<Entry*>(std::calloc(capacity, sizeof(Entry)));
        buckets = static_cast<uint32_t*>(std::calloc(capacity, sizeof(uint32_t)));
        if (entries && buckets) return true;
        std::free(entries);
        std::free(buckets);
        entries = nullptr;
        buckets = nullptr;
        return false; // no memory: the limits let requests through
    }

    uint32_t find(const Key& key, uint32_t hash, uint32_t capacity) {
        for (uint32_t i = buckets[(hash >> 6) % capacity]; i; i = at(i).chain) {
            Entry& entry = at(i);
            if (entry.hash == hash && entry.zone == key.zone && same_address(entry, key)) {
                touch(i);
                return i;
            }
        }
        return 0;
    }

    void unlink_recency(uint32_t i) {
        Entry& entry = at(i);
        if (entry.newer)
            at(entry.newer).older = entry.older;
        else
            newest = entry.older;
        if (entry.older)
            at(entry.older).newer = entry.newer;
        else
            oldest = entry.newer;
    }

    void push_newest(uint32_t i) {
        Entry& entry = at(i);
        entry.newer = 0;
        entry.older = newest;
        if (newest) at(newest).newer = i;
        newest = i;
        if (!oldest) oldest = i;
    }

    void touch(uint32_t i) {
        if (newest == i) return;
        unlink_recency(i);
        push_newest(i);
    }

    void unlink_bucket(uint32_t i, uint32_t capacity) {
        uint32_t* link = &buckets[(at(i).hash >> 6) % capacity];
        while (*link != i)
            link = &at(*link).chain;
        *link = at(i).chain;
    }

    // A fresh entry for `key`: a free one, else the least recently used
    // (one with requests in progress only when the eight oldest all have some).
    uint32_t insert(const Key& key, uint32_t hash, uint32_t capacity) {
        uint32_t i;
        if (used < capacity) {
            i = ++used;
            size.store(used, std::memory_order_relaxed);
        } else {
            i = oldest;
            for (int tries = 0; tries < 8 && at(i).slots > 0; ++tries) {
                touch(i);
                i = oldest;
            }
            unlink_recency(i);
            unlink_bucket(i, capacity);
            evictions.store(evictions.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
        }
        Entry& entry = at(i);
        std::memset(&entry, 0, sizeof entry);
        entry.address = key.address;
        entry.zone = key.zone;
        entry.hash = hash;
        uint32_t& bucket = buckets[(hash >> 6) % capacity];
        entry.chain = bucket;
        bucket = i;
        push_newest(i);
        return i;
    }
};

namespace {

// One refusal line per key per kLogIntervalMs: true for the first of an interval.
bool due_for_log(ClientTable::Entry& entry, uint64_t now_ms) {
    if (entry.logged_ms != 0 && now_ms - entry.logged_ms < ClientTable::kLogIntervalMs)
        return false;
    entry.logged_ms = now_ms ? now_ms : 1;
    return true;
}

uint64_t mix(uint64_t x) { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace

ClientTable::Key ClientTable::key_of(const SocketAddress& client, uint32_t zone) {
    Key key;
    key.zone = zone;
    if (client.storage.any.sa_family == AF_INET6) {
        std::memcpy(key.address.data(), &client.storage.v6.sin6_addr, 16);
    } else if (client.storage.any.sa_family == AF_INET) {
        key.address[10] = key.address[11] = 0xff; // RFC 4291 §2.5.5.2, as net/cidr.h
        std::memcpy(key.address.data() + 12, &client.storage.v4.sin_addr, 4);
    } // a unix socket's clients share the all-zero key
    return key;
}

ClientTable::ClientTable(uint64_t memory_bytes)
    : shard_capacity_(uint32_t(std::max<uint64_t>(memory_bytes / kShards / kEntryBytes, 4))),
      // A seed per process: which addresses share a bucket cannot be planned.
      seed_(std::random_device{}() * 0x9e3779b97f4a7c15ull + std::random_device{}()),
      shards_(std::make_unique<Shard[]>(kShards)) {}

ClientTable::~ClientTable() = default;

ClientTable::Shard& ClientTable::shard_of(const Key& key, uint32_t& hash) {
    uint64_t low, high;
    std::memcpy(&low, key.address.data(), 8);
    std::memcpy(&high, key.address.data() + 8, 8);
    // The seed keeps which addresses share a shard or bucket unpredictable.
    uint64_t h =
        mix((low ^ seed_) * 0x9e3779b97f4a7c15ull + high * 0xc2b2ae3d27d4eb4full + key.zone);
    hash = uint32_t(h);
    return shards_[hash % kShards];
}

ClientTable::RateVerdict ClientTable::take_request(const Key& key, uint64_t rate, uint64_t burst,
                                                   bool nodelay, uint64_t now_ms) {
    RateVerdict verdict;
    uint32_t hash;
    Shard& shard = shard_of(key, hash);
    std::lock_guard lock(shard.mutex);
    if (!shard.allocate(shard_capacity_)) return verdict;
    uint32_t i = shard.find(key, hash, shard_capacity_);
    if (!i) { // a new client: its first request passes (nginx: excess 0)
        i = shard.insert(key, hash, shard_capacity_);
        shard.at(i).last_ms = now_ms;
        return verdict;
    }
    Entry& entry = shard.at(i);
    // ngx_http_limit_req_lookup: the bucket leaks `rate` per second since the
    // last request let through, and this one adds 1000.
    uint64_t elapsed = now_ms > entry.last_ms ? now_ms - entry.last_ms : 0;
    // (A bucket idle long enough for rate * elapsed to overflow is empty.)
    int64_t drained =
        elapsed > uint64_t(INT64_MAX) / rate ? INT64_MAX / 2 : int64_t(rate * elapsed / 1000);
    int64_t excess = std::max<int64_t>(entry.excess - drained + 1000, 0);
    int64_t allowed = int64_t(burst) * 1000;
    if (excess > allowed) {
        verdict.pass = false;
        verdict.retry_after_ms = uint64_t(excess - allowed) * 1000 / rate;
        verdict.log = due_for_log(entry, now_ms);
        return verdict;
    }
    entry.excess = excess;
    entry.last_ms = now_ms;
    // Without nodelay the request waits until the bucket has leaked its excess.
    if (!nodelay) verdict.delay_ms = uint64_t(excess) * 1000 / rate;
    return verdict;
}

bool ClientTable::acquire(const Key& key, unsigned limit, uint64_t now_ms, bool* log) {
    uint32_t hash;
    Shard& shard = shard_of(key, hash);
    std::lock_guard lock(shard.mutex);
    if (!shard.allocate(shard_capacity_)) return true;
    uint32_t i = shard.find(key, hash, shard_capacity_);
    if (!i) i = shard.insert(key, hash, shard_capacity_);
    Entry& entry = shard.at(i);
    if (entry.slots < limit) {
        ++entry.slots;
        return true;
    }
    if (log) *log = due_for_log(entry, now_ms);
    return false;
}

void ClientTable::release(const Key& key) {
    uint32_t hash;
    Shard& shard = shard_of(key, hash);
    std::lock_guard lock(shard.mutex);
    if (!shard.entries) return;
    // An entry evicted while it had requests in progress (every candidate
    // had some) is not found: the count it had is forgotten with it.
    if (uint32_t i = shard.find(key, hash, shard_capacity_); i && shard.at(i).slots > 0)
        --shard.at(i).slots;
}

void ClientTable::count_refusal(std::string_view site, Refusal kind) {
    std::lock_guard lock(refusals_mutex_);
    auto it = std::find_if(refusals_.begin(), refusals_.end(),
                           [site](const SiteRefusals& each) { return each.site == site; });
    if (it == refusals_.end()) it = refusals_.insert(refusals_.end(), {std::string(site)});
    ++(kind == Refusal::Requests ? it->requests : it->connections);
}

std::vector<ClientTable::SiteRefusals> ClientTable::refusals() const {
    std::lock_guard lock(refusals_mutex_);
    return refusals_;
}

size_t ClientTable::size() const {
    size_t total = 0;
    for (size_t s = 0; s < kShards; ++s)
        total += shards_[s].size.load(std::memory_order_relaxed);
    return total;
}

uint64_t ClientTable::evictions() const {
    uint64_t total = 0;
    for (size_t s = 0; s < kShards; ++s)
        total += shards_[s].evictions.load(std::memory_order_relaxed);
    return total;
}

} // namespace lepus
