#include "server/status_page.h"

#include <gtest/gtest.h>
#include <regex>
#include <sstream>

namespace lepus {
namespace {

StatusSnapshot sample() {
    StatusSnapshot status;
    status.version = "0.1.0";
    status.uptime_seconds = 12.5;
    StatusSnapshot::Reactor r;
    r.active = 3;
    r.reading = 1;
    r.writing = 1;
    r.idle = 1;
    r.requests = 42;
    r.bytes_sent = 4096;
    r.fastcgi_busy = 2;
    r.fastcgi_idle = 5;
    r.fastcgi_queued = 7;
    r.tunnels = 4;
    r.proxy_busy = 6;
    r.proxy_idle = 8;
    r.proxy_queued = 9;
    r.proxy_tunnels = 11;
    r.http3_connections = 12;
    r.http3_connections_total = 13;
    r.http3_streams_total = 14;
    r.quic_packets_received = 15;
    r.quic_packets_sent = 16;
    r.quic_packets_dropped = 17;
    r.quic_packets_handed_over = 18;
    r.quic_packets_lost = 19;
    r.quic_send_calls = 20;
    r.quic_version_negotiations = 21;
    r.proxy_down = 1;
    r.proxy_failures = 3;
    status.reactors = {r, StatusSnapshot::Reactor{}};
    status.status_codes = {{200, 40}, {404, 2}};
    status.fastcgi_502 = 1;
    status.limit_entries = 3;
    status.limit_capacity = 240;
    status.limit_evictions = 5;
    status.limited = {{"example.com", 94, 1}, {"", 0, 2}};
    return status;
}

TEST(StatusPage, JsonHasTheCounters) {
    std::string out;
    render_status_json(sample(), out);
    EXPECT_NE(out.find("\"uptime_seconds\": 12.500"), std::string::npos) << out;
    EXPECT_NE(out.find("\"requests\": 42"), std::string::npos);
    EXPECT_NE(out.find("\"status_codes\": {\"200\": 40, \"404\": 2}"), std::string::npos);
    EXPECT_NE(out.find("\"bad_gateway_502\": 1"), std::string::npos);
    EXPECT_NE(out.find("\"fastcgi\": {\"busy\": 2, \"idle\": 5, \"queued\": 7}"), std::string::npos)
        << out;
    EXPECT_NE(out.find("\"proxy\": {\"busy\": 6, \"idle\": 8, \"queued\": 9, \"tunnels\": 11}"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("\"proxy_backends\": {\"down\": 1, \"failures\": 3}"), std::string::npos)
        << out;
    EXPECT_NE(out.find("\"tunnels\": 4"), std::string::npos) << out;
    EXPECT_NE(out.find("\"http3\": {\"connections\": 12, \"connections_total\": 13, "
                       "\"streams\": 0, \"streams_total\": 14, \"packets_received\": 15, "
                       "\"packets_sent\": 16, \"packets_dropped\": 17, "
                       "\"packets_handed_over\": 18, \"packets_lost\": 19, "
                       "\"send_calls\": 20, \"retries\": 0, \"version_negotiations\": 21}"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("\"limits\": {\"entries\": 3, \"capacity\": 240, \"evictions\": 5, "
                       "\"sites\": {\"example.com\": {\"limited_requests\": 94, "
                       "\"limited_connections\": 1}, \"\": {\"limited_requests\": 0, "
                       "\"limited_connections\": 2}}}"),
              std::string::npos)
        << out;
    // Balanced braces and brackets (the e2e test parses it with python's json).
    int depth = 0;
    for (char c : out) {
        if (c == '{' || c == '[') ++depth;
        if (c == '}' || c == ']') --depth;
        ASSERT_GE(depth, 0);
    }
    EXPECT_EQ(depth, 0);
}

TEST(StatusPage, PrometheusLinesAreWellFormed) {
    std::string out;
    render_status_prometheus(sample(), out);
    // Metric names: [a-zA-Z_:][a-zA-Z0-9_:]* (Prometheus data model); ours are lower case.
    std::regex sample_line(R"(^[a-z_][a-z0-9_]*(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.]+$)");
    std::istringstream lines(out);
    std::string line;
    int samples = 0;
    while (std::getline(lines, line)) {
        if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
        EXPECT_TRUE(std::regex_match(line, sample_line)) << line;
        ++samples;
    }
    EXPECT_GT(samples, 10);
    EXPECT_NE(out.find("lepus_requests_total{reactor=\"0\"} 42\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_responses_total{code=\"404\"} 2\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_limited_requests_total{site=\"example.com\"} 94\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_limited_connections_total{site=\"\"} 2\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_limit_table_evictions_total 5\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_fastcgi_connections{reactor=\"0\",state=\"busy\"} 2\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_fastcgi_connections{reactor=\"0\",state=\"idle\"} 5\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_fastcgi_connections{reactor=\"1\",state=\"busy\"} 0\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_fastcgi_queued_requests{reactor=\"0\"} 7\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_proxy_connections{reactor=\"0\",state=\"idle\"} 8\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_proxy_queued_requests{reactor=\"0\"} 9\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_proxy_tunnels{reactor=\"0\"} 11\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_http3_connections{reactor=\"0\"} 12\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_quic_packets_dropped_total{reactor=\"0\"} 17\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_quic_packets_lost_total{reactor=\"0\"} 19\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_quic_send_calls_total{reactor=\"0\"} 20\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_quic_version_negotiations_total{reactor=\"0\"} 21\n"),
              std::string::npos);
    EXPECT_NE(out.find("lepus_proxy_backends_down{reactor=\"0\"} 1\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_proxy_backend_failures_total{reactor=\"0\"} 3\n"), std::string::npos);
    EXPECT_NE(out.find("lepus_connections{reactor=\"0\",state=\"tunnel\"} 4\n"), std::string::npos);
}

} // namespace
} // namespace lepus
