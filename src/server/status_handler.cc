#include "server/status_handler.h"

#include "net/tls_transport.h"
#include "server/route_state.h"
#include "server/serving_set.h"
#include "server/status_page.h"
#include "server/worker.h"

#include <algorithm>

namespace lepus {
namespace {

// Adds one reactor's pools of `protocol` to the snapshot's backends, by address.
void add_backends(StatusSnapshot& status, const char* protocol,
                  const upstream::UpstreamGauges& gauges, uint64_t now_ms) {
    for (const auto& pool : gauges.backends()) {
        auto found = std::find_if(status.backends.begin(), status.backends.end(), [&](auto& b) {
            return b.protocol == protocol && b.address == pool->address;
        });
        StatusSnapshot::Backend& backend =
            found != status.backends.end()
                ? *found
                : status.backends.emplace_back(StatusSnapshot::Backend{protocol, pool->address});
        ++backend.reactors;
        backend.down += pool->down.load(std::memory_order_relaxed);
        backend.in_flight += pool->in_flight.load(std::memory_order_relaxed);
        backend.failures += pool->failures.load(std::memory_order_relaxed);
        uint64_t checked_ms = pool->last_check_ms.load(std::memory_order_relaxed);
        if (checked_ms == 0) continue;
        double ago = double(now_ms > checked_ms ? now_ms - checked_ms : 0) / 1000.0;
        if (!backend.checked || ago < backend.last_check_seconds_ago) {
            backend.checked = true;
            backend.last_check_seconds_ago = ago;
            backend.last_check_passed = pool->last_check_passed.load(std::memory_order_relaxed);
        }
    }
}

// Every worker's counters, summed where the page shows totals.
StatusSnapshot take_snapshot(Worker& worker, const ServingSet& serving, uint64_t now_ms) {
    StatusSnapshot status;
    status.version = LEPUS_VERSION;
    status.uptime_seconds = double(now_ms - worker.shared().started_ms) / 1000.0;
    std::array<uint64_t, 600> codes{};
    for (Worker* each : worker.shared().workers) {
        WorkerStats& stats = each->stats();
        StatusSnapshot::Reactor r;
        r.active = each->reactor().load().live_connections.load(std::memory_order_relaxed);
        r.reading = stats.phases.reading.load(std::memory_order_relaxed);
        r.writing = stats.phases.writing.load(std::memory_order_relaxed);
        r.tunnels = stats.phases.tunnels.load(std::memory_order_relaxed);
        uint64_t busy = r.reading + r.writing + r.tunnels;
        r.idle = r.active > busy ? r.active - busy : 0;
        r.requests = stats.requests.load(std::memory_order_relaxed);
        r.bytes_sent = stats.bytes_sent.load(std::memory_order_relaxed);
        r.cache_hits = stats.cache_hits.load(std::memory_order_relaxed);
        r.cache_misses = stats.cache_misses.load(std::memory_order_relaxed);
        r.http2_connections = stats.http2.connections.load(std::memory_order_relaxed);
        r.http2_streams = stats.http2.streams.load(std::memory_order_relaxed);
        r.http2_streams_total = stats.http2.streams_total.load(std::memory_order_relaxed);
        r.http2_connections_total = stats.http2.connections_total.load(std::memory_order_relaxed);
        r.http3_connections = stats.quic.connections.load(std::memory_order_relaxed);
        r.http3_connections_total = stats.quic.connections_total.load(std::memory_order_relaxed);
        r.http3_streams = stats.http3.streams.load(std::memory_order_relaxed);
        r.http3_streams_total = stats.http3.streams_total.load(std::memory_order_relaxed);
        r.quic_packets_received = stats.quic.packets_received.load(std::memory_order_relaxed);
        r.quic_packets_sent = stats.quic.packets_sent.load(std::memory_order_relaxed);
        r.quic_packets_dropped = stats.quic.packets_dropped.load(std::memory_order_relaxed);
        r.quic_packets_handed_over = stats.quic.handed_over.load(std::memory_order_relaxed);
        r.quic_retries = stats.quic.retries.load(std::memory_order_relaxed);
        r.quic_packets_lost = stats.quic.packets_lost.load(std::memory_order_relaxed);
        r.quic_send_calls = stats.quic.send_calls.load(std::memory_order_relaxed);
        r.quic_version_negotiations =
            stats.quic.version_negotiations.load(std::memory_order_relaxed);
        upstream::UpstreamGauges& gauges = each->fastcgi_gauges();
        r.fastcgi_busy = gauges.busy.load(std::memory_order_relaxed);
        r.fastcgi_idle = gauges.idle.load(std::memory_order_relaxed);
        r.fastcgi_queued = gauges.queued.load(std::memory_order_relaxed);
        r.fastcgi_down = gauges.down.load(std::memory_order_relaxed);
        r.fastcgi_failures = gauges.failures.load(std::memory_order_relaxed);
        upstream::UpstreamGauges& proxy = each->proxy_gauges();
        r.proxy_busy = proxy.busy.load(std::memory_order_relaxed);
        r.proxy_idle = proxy.idle.load(std::memory_order_relaxed);
        r.proxy_queued = proxy.queued.load(std::memory_order_relaxed);
        r.proxy_tunnels = proxy.tunnels.load(std::memory_order_relaxed);
        r.proxy_down = proxy.down.load(std::memory_order_relaxed);
        r.proxy_failures = proxy.failures.load(std::memory_order_relaxed);
        add_backends(status, "fastcgi", gauges, now_ms);
        add_backends(status, "proxy", proxy, now_ms);
        TlsCounters& tls = tls_counters(each->reactor().index());
        r.tls_connections = tls.connections.load(std::memory_order_relaxed);
        r.tls_handshakes = tls.handshakes.load(std::memory_order_relaxed);
        r.tls_resumed = tls.resumed.load(std::memory_order_relaxed);
        r.tls_handshake_failures = tls.handshake_failures.load(std::memory_order_relaxed);
        for (size_t code = 0; code < codes.size(); ++code)
            codes[code] += stats.responses[code].load(std::memory_order_relaxed);
        status.reactors.push_back(r);
    }
    for (size_t code = 100; code < codes.size(); ++code)
        if (codes[code]) status.status_codes.emplace_back(int(code), codes[code]);
    status.fastcgi_502 = codes[502];
    status.fastcgi_503 = codes[503];
    status.fastcgi_504 = codes[504];
    status.log_lines_dropped = worker.access_log().dropped_lines();
    for (const auto& log : serving.access_logs) // the per-site logs
        status.log_lines_dropped += log->dropped_lines();
    if (const ClientTable* clients = worker.shared().clients) {
        status.limit_entries = clients->size();
        status.limit_capacity = clients->capacity();
        status.limit_evictions = clients->evictions();
        for (ClientTable::SiteRefusals& site : clients->refusals())
            status.limited.push_back({std::move(site.site), site.requests, site.connections});
    }
    return status;
}

} // namespace

void serve_status(Worker& worker, std::span<const Cidr> allow, Exchange& exchange) {
    const Request& request = *exchange.request;
    Response& response = exchange.response;
    ReplyContext context{exchange.keep_alive, request.is_head()};
    const SocketAddress& peer = exchange.client;
    if (std::none_of(allow.begin(), allow.end(),
                     [&](const Cidr& network) { return network.contains(peer); }))
        return build_error_response(403, context, response);
    if (request.method != Method::Get && request.method != Method::Head) {
        build_error_response(405, context, response);
        return response.head.add("Allow", "GET, HEAD");
    }

    const ServingSet& serving = *exchange.route->serving;
    StatusSnapshot status = take_snapshot(worker, serving, exchange.now_ms);
    bool prometheus = request.query.find("format=prometheus") != std::string_view::npos;
    std::string& body = response.owned_body;
    body.clear();
    if (prometheus)
        render_status_prometheus(status, body);
    else
        render_status_json(status, body);

    begin_head(200, exchange.keep_alive, response);
    response.head.add("Content-Type",
                      prometheus ? "text/plain; version=0.0.4; charset=utf-8" : "application/json");
    response.head.add("Cache-Control", "no-store");
    response.head.content_length = body.size();
    if (!request.is_head()) response.body = body;
}

} // namespace lepus
