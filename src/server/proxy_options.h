// The reverse proxy's command-line options (--proxy, --proxy-*) and the check
// of a [[site]]'s `proxy`, kept apart from options.cc.
#pragma once

#include "server/config_file.h"

#include <cstdint>
#include <string>

namespace CLI {
class App;
class Validator;
} // namespace CLI

namespace lepus {

struct ServerOptions;

// The proxy settings of ServerOptions.
struct ProxyOptions {
    std::string address; // --proxy: "http://HOST:PORT" or "unix:/path"; empty: off
    unsigned pool = 32;  // connections per backend, summed over the reactors
    // WebSocket (any upgrade) tunnels per backend, summed over the reactors; they
    // hold no pool connection. nginx and Caddy have no such bound but the fds.
    unsigned tunnels = 1024;
    // Requests per reactor waiting for a connection. Larger than FastCGI's 64:
    // nginx opens as many backend connections as it has clients (`keepalive 32`
    // only caches idle ones), so 100 clients behind a 32-connection pool must
    // wait, not get 503.
    unsigned queue = 1024;
    uint64_t queue_timeout_ms = 10000;
    uint64_t connect_timeout_ms = 10000;
    uint64_t timeout_ms = 60000; // nginx's proxy_read_timeout
    uint64_t idle_timeout_ms = 30000;
    uint64_t head_max =
        uint64_t{16} * 1024; // the largest response head (nginx's proxy_buffer_size, x2)
};

// The texts of the duration and size options, converted by finish_proxy_options.
struct ProxyOptionTexts {
    std::string queue_timeout, connect_timeout, timeout, idle_timeout, head_max;
};

void add_proxy_options(CLI::App& app, ProxyOptions& options, ProxyOptionTexts& texts,
                       const CLI::Validator& duration, const CLI::Validator& size);
// Converts the texts; one line naming the problem, or empty.
std::string finish_proxy_options(ProxyOptions& options, const ProxyOptionTexts& texts);
// One line naming what is wrong with a [[site]]'s proxy, or empty.
std::string check_site_proxy(const SiteProxy& proxy);

} // namespace lepus
