#include "server/status_page.h"

#include <cstdio>
#include <span>
#include <utility>

namespace lepus {
namespace {

void append_number(std::string& out, uint64_t value) {
    out += std::to_string(value);
}

void append_field(std::string& out, const char* name, uint64_t value, bool comma = true) {
    out += '"';
    out += name;
    out += "\": ";
    append_number(out, value);
    if (comma) out += ", ";
}

// A server name inside quotes (JSON string, Prometheus label value): the
// config's names are host names, but a backslash or quote must not break out.
void append_quoted_text(std::string& out, const std::string& text) {
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
    }
}

using ReactorField = uint64_t StatusSnapshot::Reactor::*;

void append_metric(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

using ReactorState = std::pair<const char*, ReactorField>;
using ReactorStats = StatusSnapshot::Reactor;
constexpr ReactorState kConnectionStates[] = {{"reading", &ReactorStats::reading},
                                              {"writing", &ReactorStats::writing},
                                              {"tunnel", &ReactorStats::tunnels},
                                              {"idle", &ReactorStats::idle}};
constexpr ReactorState kFastCgiStates[] = {{"busy", &ReactorStats::fastcgi_busy},
                                           {"idle", &ReactorStats::fastcgi_idle}};
constexpr ReactorState kProxyStates[] = {{"busy", &ReactorStats::proxy_busy},
                                         {"idle", &ReactorStats::proxy_idle}};

// The Prometheus metrics kept per reactor, in the order they are written: a
// value per reactor, or, with `states`, one per reactor and state.
struct ReactorMetric {
    const char* name;
    const char* type;
    const char* help;
    ReactorField field; // null when by state
    std::span<const ReactorState> states = {};
};

constexpr ReactorMetric kReactorMetrics[] = {
    {"lepus_connections", "gauge", "Client connections by state.", nullptr, kConnectionStates},
    {"lepus_requests_total", "counter", "Requests served.", &ReactorStats::requests},
    {"lepus_sent_bytes_total", "counter", "Response bytes sent (heads and bodies).",
     &ReactorStats::bytes_sent},
    {"lepus_open_file_cache_hits_total", "counter", "Open-file cache hits.",
     &ReactorStats::cache_hits},
    {"lepus_open_file_cache_misses_total", "counter", "Open-file cache misses.",
     &ReactorStats::cache_misses},
    {"lepus_fastcgi_connections", "gauge",
     "FastCGI backend connections by state, summed over the reactor's backends.", nullptr,
     kFastCgiStates},
    {"lepus_fastcgi_queued_requests", "gauge", "Requests waiting for a FastCGI backend connection.",
     &ReactorStats::fastcgi_queued},
    {"lepus_fastcgi_backends_down", "gauge",
     "FastCGI backends taken out (max_fails, or failed health checks).",
     &ReactorStats::fastcgi_down},
    {"lepus_fastcgi_backend_failures_total", "counter",
     "Failed FastCGI connections and health checks.", &ReactorStats::fastcgi_failures},
    {"lepus_http2_connections", "gauge", "HTTP/2 connections open.",
     &ReactorStats::http2_connections},
    {"lepus_http2_connections_total", "counter", "HTTP/2 connections opened.",
     &ReactorStats::http2_connections_total},
    {"lepus_http2_streams", "gauge", "HTTP/2 streams open.", &ReactorStats::http2_streams},
    {"lepus_http2_streams_total", "counter", "HTTP/2 streams opened.",
     &ReactorStats::http2_streams_total},
    {"lepus_http3_connections", "gauge", "QUIC connections open (HTTP/3).",
     &ReactorStats::http3_connections},
    {"lepus_http3_connections_total", "counter", "QUIC connections opened (HTTP/3).",
     &ReactorStats::http3_connections_total},
    {"lepus_http3_streams_total", "counter", "HTTP/3 request streams opened.",
     &ReactorStats::http3_streams_total},
    {"lepus_quic_packets_received_total", "counter", "UDP packets received on quic:// sockets.",
     &ReactorStats::quic_packets_received},
    {"lepus_quic_packets_sent_total", "counter", "UDP packets sent on quic:// sockets.",
     &ReactorStats::quic_packets_sent},
    {"lepus_quic_packets_dropped_total", "counter",
     "QUIC packets dropped (unusable, or a full socket buffer).",
     &ReactorStats::quic_packets_dropped},
    {"lepus_quic_retries_total", "counter",
     "QUIC Retry packets sent (address validation under a handshake flood).",
     &ReactorStats::quic_retries},
    {"lepus_quic_version_negotiations_total", "counter",
     "QUIC Version Negotiation packets sent (RFC 9000 §6).",
     &ReactorStats::quic_version_negotiations},
    {"lepus_quic_packets_lost_total", "counter",
     "QUIC packets with stream data declared lost (RFC 9002 §6).",
     &ReactorStats::quic_packets_lost},
    {"lepus_quic_send_calls_total", "counter",
     "sendmmsg/sendmsg calls on quic:// sockets (GSO and batching: fewer than "
     "packets).",
     &ReactorStats::quic_send_calls},
    {"lepus_proxy_connections", "gauge",
     "HTTP backend connections by state, summed over the reactor's backends.", nullptr,
     kProxyStates},
    {"lepus_proxy_queued_requests", "gauge", "Requests waiting for an HTTP backend connection.",
     &ReactorStats::proxy_queued},
    {"lepus_proxy_tunnels", "gauge",
     "HTTP backend connections a 101 made tunnels (out of the pool).",
     &ReactorStats::proxy_tunnels},
    {"lepus_proxy_backends_down", "gauge",
     "HTTP backends taken out (max_fails, or failed health checks).", &ReactorStats::proxy_down},
    {"lepus_proxy_backend_failures_total", "counter",
     "Failed HTTP backend connections and health checks.", &ReactorStats::proxy_failures},
    {"lepus_tls_connections_total", "counter", "Connections accepted on TLS listeners.",
     &ReactorStats::tls_connections},
    {"lepus_tls_handshakes_total", "counter", "TLS handshakes completed.",
     &ReactorStats::tls_handshakes},
    {"lepus_tls_resumed_total", "counter", "TLS handshakes resumed from a session ticket.",
     &ReactorStats::tls_resumed},
    {"lepus_tls_handshake_failures_total", "counter",
     "TLS handshakes that failed (old protocol, garbage, plain HTTP, EOF).",
     &ReactorStats::tls_handshake_failures},
};

void append_reactor_metrics(const StatusSnapshot& status, std::string& out) {
    for (const ReactorMetric& metric : kReactorMetrics) {
        append_metric(out, metric.name, metric.type, metric.help);
        for (size_t i = 0; i < status.reactors.size(); ++i) {
            const std::string reactor = "{reactor=\"" + std::to_string(i) + "\"";
            if (metric.states.empty()) {
                out += metric.name + reactor + "} ";
                append_number(out, status.reactors[i].*metric.field);
                out += '\n';
            }
            for (const auto& [state, field] : metric.states) {
                out += metric.name + reactor + ",state=\"" + state + "\"} ";
                append_number(out, status.reactors[i].*field);
                out += '\n';
            }
        }
    }
}

} // namespace

// "up" (no reactor has it out), "down" (every one) or "partly down" (each
// reactor keeps its own passive and active health).
const char* backend_state(const StatusSnapshot::Backend& backend) {
    if (backend.down == 0) return "up";
    return backend.down >= backend.reactors ? "down" : "partly down";
}

// "backends": [{"protocol": "fastcgi", "address": "...", "state": "up", ...}]
void append_backends_json(const StatusSnapshot& status, std::string& out) {
    out += "\"backends\": [";
    for (size_t i = 0; i < status.backends.size(); ++i) {
        const StatusSnapshot::Backend& backend = status.backends[i];
        out += i ? R"(, {"protocol": ")" : R"({"protocol": ")";
        out += backend.protocol;
        out += R"(", "address": ")";
        append_quoted_text(out, backend.address);
        out += R"(", "state": ")";
        out += backend_state(backend);
        out += "\", ";
        append_field(out, "reactors_down", backend.down);
        append_field(out, "in_flight", backend.in_flight);
        append_field(out, "failures", backend.failures);
        out += "\"last_check\": ";
        if (backend.checked) {
            char ago[32];
            std::snprintf(ago, sizeof ago, "%.3f", backend.last_check_seconds_ago);
            out.append("{\"seconds_ago\": ").append(ago);
            out += backend.last_check_passed ? ", \"passed\": true}" : ", \"passed\": false}";
        } else {
            out += "null";
        }
        out += '}';
    }
    out += "], ";
}

// lepus_backend_*{protocol="fastcgi",backend="unix:/run/php/a.sock"}.
void append_backends_prometheus(const StatusSnapshot& status, std::string& out) {
    using Value = double (*)(const StatusSnapshot::Backend&);
    Value seconds_ago = [](const StatusSnapshot::Backend& b) { return b.last_check_seconds_ago; };
    struct Metric {
        const char* name;
        const char* type;
        const char* help;
        Value value;
        bool checked_only; // only for backends with active checks (a seconds value)
    };
    const Metric metrics[] = {
        {"lepus_backend_up", "gauge", "1 when no reactor has the backend taken out, else 0.",
         [](const StatusSnapshot::Backend& b) { return b.down == 0 ? 1.0 : 0.0; }, false},
        {"lepus_backend_in_flight", "gauge", "Requests the backend is serving.",
         [](const StatusSnapshot::Backend& b) { return double(b.in_flight); }, false},
        {"lepus_backend_failures_total", "counter",
         "Failed connections and health checks of the backend.",
         [](const StatusSnapshot::Backend& b) { return double(b.failures); }, false},
        {"lepus_backend_last_check_seconds", "gauge",
         "Seconds since the backend's last active health check.", seconds_ago, true},
        {"lepus_backend_last_check_passed", "gauge",
         "1 when the backend's last active health check passed, else 0.",
         [](const StatusSnapshot::Backend& b) { return b.last_check_passed ? 1.0 : 0.0; }, true},
    };
    for (const Metric& metric : metrics) {
        append_metric(out, metric.name, metric.type, metric.help);
        for (const StatusSnapshot::Backend& backend : status.backends) {
            if (metric.checked_only && !backend.checked) continue;
            char value[32];
            std::snprintf(value, sizeof value, metric.value == seconds_ago ? "%.3f" : "%.0f",
                          metric.value(backend));
            out.append(metric.name).append("{protocol=\"").append(backend.protocol);
            out += "\",backend=\"";
            append_quoted_text(out, backend.address);
            out.append("\"} ").append(value) += '\n';
        }
    }
}

void render_status_json(const StatusSnapshot& status, std::string& out) {
    char uptime[32];
    std::snprintf(uptime, sizeof uptime, "%.3f", status.uptime_seconds);
    out.append(R"({"version": ")").append(status.version);
    out.append(R"(", "uptime_seconds": )").append(uptime);
    out += ", \"reactors\": [";
    for (size_t i = 0; i < status.reactors.size(); ++i) {
        const auto& r = status.reactors[i];
        out += i ? ", {" : "{";
        append_field(out, "reactor", i);
        out += "\"connections\": {";
        append_field(out, "active", r.active);
        append_field(out, "reading", r.reading);
        append_field(out, "writing", r.writing);
        append_field(out, "tunnels", r.tunnels);
        append_field(out, "idle", r.idle, false);
        out += "}, ";
        append_field(out, "requests", r.requests);
        append_field(out, "bytes_sent", r.bytes_sent);
        append_field(out, "open_file_cache_hits", r.cache_hits);
        append_field(out, "open_file_cache_misses", r.cache_misses);
        out += "\"fastcgi\": {";
        append_field(out, "busy", r.fastcgi_busy);
        append_field(out, "idle", r.fastcgi_idle);
        append_field(out, "queued", r.fastcgi_queued, false);
        out += "}, \"proxy\": {";
        append_field(out, "busy", r.proxy_busy);
        append_field(out, "idle", r.proxy_idle);
        append_field(out, "queued", r.proxy_queued);
        append_field(out, "tunnels", r.proxy_tunnels, false);
        // Apart from the connection gauges above, which readers compare whole.
        out += "}, \"fastcgi_backends\": {";
        append_field(out, "down", r.fastcgi_down);
        append_field(out, "failures", r.fastcgi_failures, false);
        out += "}, \"proxy_backends\": {";
        append_field(out, "down", r.proxy_down);
        append_field(out, "failures", r.proxy_failures, false);
        out += "}, \"tls\": {";
        append_field(out, "connections", r.tls_connections);
        append_field(out, "handshakes", r.tls_handshakes);
        append_field(out, "resumed", r.tls_resumed);
        append_field(out, "handshake_failures", r.tls_handshake_failures, false);
        out += "}, \"http2\": {";
        append_field(out, "connections", r.http2_connections);
        append_field(out, "streams", r.http2_streams);
        append_field(out, "streams_total", r.http2_streams_total);
        append_field(out, "connections_total", r.http2_connections_total, false);
        out += "}, \"http3\": {";
        append_field(out, "connections", r.http3_connections);
        append_field(out, "connections_total", r.http3_connections_total);
        append_field(out, "streams", r.http3_streams);
        append_field(out, "streams_total", r.http3_streams_total);
        append_field(out, "packets_received", r.quic_packets_received);
        append_field(out, "packets_sent", r.quic_packets_sent);
        append_field(out, "packets_dropped", r.quic_packets_dropped);
        append_field(out, "packets_handed_over", r.quic_packets_handed_over);
        append_field(out, "packets_lost", r.quic_packets_lost);
        append_field(out, "send_calls", r.quic_send_calls);
        append_field(out, "retries", r.quic_retries);
        append_field(out, "version_negotiations", r.quic_version_negotiations, false);
        out += "}}";
    }
    out += "], \"status_codes\": {";
    for (size_t i = 0; i < status.status_codes.size(); ++i) {
        if (i) out += ", ";
        out += '"' + std::to_string(status.status_codes[i].first) + "\": ";
        append_number(out, status.status_codes[i].second);
    }
    out += "}, \"fastcgi\": {";
    append_field(out, "rejected_503", status.fastcgi_503);
    append_field(out, "bad_gateway_502", status.fastcgi_502);
    append_field(out, "timeout_504", status.fastcgi_504, false);
    out += "}, ";
    append_field(out, "log_lines_dropped", status.log_lines_dropped);
    append_backends_json(status, out);
    out += "\"limits\": {";
    append_field(out, "entries", status.limit_entries);
    append_field(out, "capacity", status.limit_capacity);
    append_field(out, "evictions", status.limit_evictions);
    out += "\"sites\": {";
    for (size_t i = 0; i < status.limited.size(); ++i) {
        const StatusSnapshot::LimitedSite& site = status.limited[i];
        out += i ? ", \"" : "\"";
        append_quoted_text(out, site.site);
        out += "\": {";
        append_field(out, "limited_requests", site.requests);
        append_field(out, "limited_connections", site.connections, false);
        out += '}';
    }
    out += "}}}\n";
}

void render_status_prometheus(const StatusSnapshot& status, std::string& out) {
    char uptime[32];
    std::snprintf(uptime, sizeof uptime, "%.3f", status.uptime_seconds);
    append_metric(out, "lepus_uptime_seconds", "gauge", "Seconds since lepus started.");
    out += std::string("lepus_uptime_seconds ") + uptime + "\n";
    append_reactor_metrics(status, out);
    append_metric(out, "lepus_responses_total", "counter", "Responses by status code.");
    for (auto& [code, count] : status.status_codes)
        out += "lepus_responses_total{code=\"" + std::to_string(code) + "\"} " +
               std::to_string(count) + "\n";
    append_metric(out, "lepus_fastcgi_failures_total", "counter",
                  "FastCGI requests answered by lepus with an error.");
    out +=
        "lepus_fastcgi_failures_total{code=\"502\"} " + std::to_string(status.fastcgi_502) + "\n";
    out +=
        "lepus_fastcgi_failures_total{code=\"503\"} " + std::to_string(status.fastcgi_503) + "\n";
    out +=
        "lepus_fastcgi_failures_total{code=\"504\"} " + std::to_string(status.fastcgi_504) + "\n";
    append_metric(out, "lepus_log_lines_dropped_total", "counter",
                  "Log lines dropped because the disk fell behind.");
    out += "lepus_log_lines_dropped_total " + std::to_string(status.log_lines_dropped) + "\n";
    append_backends_prometheus(status, out);
    append_metric(out, "lepus_limit_table_entries", "gauge",
                  "Clients the limits remember (entries of the client table in use).");
    out += "lepus_limit_table_entries " + std::to_string(status.limit_entries) + "\n";
    append_metric(out, "lepus_limit_table_capacity", "gauge",
                  "Clients the limits can remember within --limit-memory.");
    out += "lepus_limit_table_capacity " + std::to_string(status.limit_capacity) + "\n";
    append_metric(out, "lepus_limit_table_evictions_total", "counter",
                  "Clients the limits forgot to make room (least recently seen first).");
    out += "lepus_limit_table_evictions_total " + std::to_string(status.limit_evictions) + "\n";
    const std::pair<const char*, uint64_t StatusSnapshot::LimitedSite::*> refusals[] = {
        {"lepus_limited_requests_total", &StatusSnapshot::LimitedSite::requests},
        {"lepus_limited_connections_total", &StatusSnapshot::LimitedSite::connections}};
    for (auto& [name, field] : refusals) {
        append_metric(out, name, "counter",
                      field == &StatusSnapshot::LimitedSite::requests
                          ? "Requests refused by a site's rate limits."
                          : "Requests refused by a connection limit (conn_limit, --conn-limit).");
        for (const StatusSnapshot::LimitedSite& site : status.limited) {
            out += name;
            out += "{site=\"";
            append_quoted_text(out, site.site);
            out += "\"} " + std::to_string(site.*field) + "\n";
        }
    }
}

} // namespace lepus
