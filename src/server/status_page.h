// The status page (--status-path): what the server is doing, as JSON or in
// the Prometheus text exposition format. Rendering only; the counters are
// gathered into a StatusSnapshot by the server.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lepus {

struct StatusSnapshot {
    struct Reactor {
        // tunnels: connections a 101 turned into a byte tunnel (WebSocket
        // through the proxy).
        uint64_t active = 0, reading = 0, writing = 0, tunnels = 0, idle = 0;
        uint64_t requests = 0, bytes_sent = 0;
        uint64_t cache_hits = 0, cache_misses = 0;
        // FastCGI, summed over the reactor's pools (one per backend): backend
        // connections serving (or draining) a request, idle in the pool, and
        // requests waiting for one.
        uint64_t fastcgi_busy = 0, fastcgi_idle = 0, fastcgi_queued = 0;
        // Backends taken out (max_fails, or failed health checks), and
        // failed connections and checks since start.
        uint64_t fastcgi_down = 0, fastcgi_failures = 0;
        // The same for the reverse proxy's HTTP backends.
        uint64_t proxy_busy = 0, proxy_idle = 0, proxy_queued = 0, proxy_tunnels = 0;
        uint64_t proxy_down = 0, proxy_failures = 0;
        // TLS: connections accepted on https:// listeners, handshakes
        // completed (of which resumed from a ticket) and failed.
        uint64_t tls_connections = 0, tls_handshakes = 0, tls_resumed = 0,
                 tls_handshake_failures = 0;
        // HTTP/2: connections open, streams open, streams since start.
        uint64_t http2_connections = 0, http2_streams = 0, http2_streams_total = 0,
                 http2_connections_total = 0;
        // HTTP/3: QUIC connections open and since start, streams, and the
        // UDP packets of the reactor's quic:// sockets (dropped: unusable, or
        // refused by a full socket buffer; handed over: another reactor's;
        // lost: declared lost by loss recovery, RFC 9002 §6; send calls:
        // sendmmsg/sendmsg, fewer than packets sent with batching and GSO).
        uint64_t http3_connections = 0, http3_connections_total = 0, http3_streams = 0,
                 http3_streams_total = 0, quic_packets_received = 0, quic_packets_sent = 0,
                 quic_packets_dropped = 0, quic_packets_handed_over = 0, quic_retries = 0,
                 quic_packets_lost = 0, quic_send_calls = 0, quic_version_negotiations = 0;
    };
    double uptime_seconds = 0;
    std::string version;
    std::vector<Reactor> reactors;
    std::vector<std::pair<int, uint64_t>> status_codes; // (code, responses), ascending
    uint64_t fastcgi_503 = 0, fastcgi_502 = 0, fastcgi_504 = 0;
    uint64_t log_lines_dropped = 0;
    // The limits (server/client_table.h): the client table's entries in use,
    // the entries --limit-memory holds, evictions; per site (its first server
    // name, "" for the default), requests refused by a rate and by a conn limit.
    uint64_t limit_entries = 0, limit_capacity = 0, limit_evictions = 0;
    struct LimitedSite {
        std::string site;
        uint64_t requests = 0, connections = 0;
    };
    std::vector<LimitedSite> limited;
    // Each backend (FastCGI or HTTP), summed over the reactors' pools of it:
    // how many reactors have it taken out, requests in flight, failures since
    // start, and its last active health check (the most recent of any
    // reactor: how long ago, and whether it passed).
    struct Backend {
        std::string protocol; // "fastcgi" or "proxy"
        std::string address;
        uint64_t reactors = 0, down = 0, in_flight = 0, failures = 0;
        bool checked = false, last_check_passed = false;
        double last_check_seconds_ago = 0;
    };
    std::vector<Backend> backends;
};

// {"uptime_seconds": ..., "reactors": [...], "status_codes": {"200": n}, ...}
void render_status_json(const StatusSnapshot& status, std::string& out);

// lepus_* metrics with labels reactor="i" and code="200"; text format 0.0.4.
void render_status_prometheus(const StatusSnapshot& status, std::string& out);

} // namespace lepus
