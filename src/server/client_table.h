// ClientTable: the per-client state of the limits (server/limits.h), shared by
// every reactor: nginx's limit_req leaky buckets and limit_conn counters,
// keyed by (client address, zone), where a zone is one rule of one site.
//
// Bounded in memory: --limit-memory is split between kShards shards, each a
// fixed array of 64-byte entries with a hash index, allocated on first use,
// so a server without limits pays nothing (a shard once used may hold its
// whole share: tcmalloc's calloc writes the zeroes). A full shard evicts its
// least recently used entry: an attacker with a million addresses makes the
// table forget old clients, never grow. Each shard has its own lock (a
// test-and-set lock, client_table.cc) and a key picks its shard by hash, so two
// reactors meet only when their clients share a shard: no global lock.
#pragma once

#include "net/socket.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

class ClientTable {
public:
    static constexpr size_t kShards = 64;
    static constexpr size_t kEntryBytes = 64 + 4; // an entry and its hash bucket
    static constexpr uint64_t kMinMemory = kShards * kEntryBytes * 4;
    // One "limiting requests" line per key and zone at most this often.
    static constexpr uint64_t kLogIntervalMs = 60000;

    struct Key {
        std::array<uint8_t, 16> address{}; // IPv6, or IPv4 as ::ffff:a.b.c.d
        uint32_t zone = 0;
    };
    // The key of a client address (port ignored) in `zone`.
    static Key key_of(const SocketAddress& client, uint32_t zone);

    explicit ClientTable(uint64_t memory_bytes);
    ~ClientTable();
    ClientTable(const ClientTable&) = delete;
    ClientTable& operator=(const ClientTable&) = delete;

    // nginx's limit_req, leaky bucket: `rate` in requests per 1000 s, `burst`
    // requests above it. Pass: go on now (delay_ms 0) or after delay_ms;
    // Refuse: over the burst, try again in retry_after_ms; `log` is true for
    // the first refusal of this key in kLogIntervalMs.
    struct RateVerdict {
        bool pass = true;
        uint64_t delay_ms = 0, retry_after_ms = 0;
        bool log = false;
    };
    RateVerdict take_request(const Key& key, uint64_t rate, uint64_t burst, bool nodelay,
                             uint64_t now_ms);

    // nginx's limit_conn: one more request in progress for `key`, unless it
    // has `limit` already (false). An entry with requests in progress is
    // evicted last. release() gives the slot back. On a refusal `*log` says
    // whether it is the key's first in kLogIntervalMs (as take_request's).
    bool acquire(const Key& key, unsigned limit, uint64_t now_ms = 0, bool* log = nullptr);
    void release(const Key& key);

    // Refusals per site (its first server name; "" for the default root), for
    // the status page: requests over a rate, requests over a conn limit.
    enum class Refusal : uint8_t { Requests, Connections };
    struct SiteRefusals {
        std::string site;
        uint64_t requests = 0, connections = 0;
    };
    void count_refusal(std::string_view site, Refusal kind);
    std::vector<SiteRefusals> refusals() const;

    // For the status page: entries in use, entries the budget holds, evictions.
    size_t size() const;
    size_t capacity() const { return shard_capacity_ * kShards; }
    uint64_t evictions() const;

    struct Entry; // one client and zone (client_table.cc)

private:
    struct Shard;
    Shard& shard_of(const Key& key, uint32_t& hash);

    uint32_t shard_capacity_;
    uint64_t seed_;
    std::unique_ptr<Shard[]> shards_;
    // Taken on refusals only, never on a request that passes.
    mutable std::mutex refusals_mutex_;
    std::vector<SiteRefusals> refusals_;
};

// A request in progress counted by ClientTable::acquire: released when the
// route state lets go (RouteState::reset, or its destruction).
class ClientSlot {
public:
    ClientSlot() = default;
    ~ClientSlot() { reset(); }
    ClientSlot(const ClientSlot&) = delete;
    ClientSlot& operator=(const ClientSlot&) = delete;

    void hold(ClientTable& table, const ClientTable::Key& key) {
        reset();
        table_ = &table;
        key_ = key;
    }
    void reset() {
        if (table_) table_->release(key_);
        table_ = nullptr;
    }
    bool held() const { return table_ != nullptr; }

private:
    ClientTable* table_ = nullptr;
    ClientTable::Key key_;
};

} // namespace lepus
