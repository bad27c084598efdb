#include "server/proxy_options.h"

#include "base/units.h"
#include "proxy/backend_url.h"

#include <CLI/CLI.hpp>

namespace lepus {

void add_proxy_options(CLI::App& app, ProxyOptions& options, ProxyOptionTexts& texts,
                       const CLI::Validator& duration, const CLI::Validator& size) {
    app.option_defaults()->group("Reverse proxy");
    app.add_option("--proxy", options.address,
                   "Send what the files do not have to this HTTP backend: http://HOST:PORT or "
                   "unix:/path (try_files $uri @app)")
        ->check(CLI::Validator(
            [](std::string& text) {
                return proxy::parse_backend_url(text)
                           ? std::string()
                           : "'" + text + "' is not http://HOST:PORT, HOST:PORT or unix:/path";
            },
            "URL"));
    app.add_option("--proxy-pool", options.pool,
                   "Connections per backend in all, split over the reactors, kept alive (32)")
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--proxy-tunnels", options.tunnels,
                   "WebSocket (upgrade) tunnels per backend in all, split over the reactors, "
                   "apart from the pool (1024); more get 503")
        ->check(CLI::Range(1u, 1u << 20));
    app.add_option("--proxy-queue", options.queue,
                   "Requests per reactor waiting for a backend connection (1024); more get 503")
        ->check(CLI::Range(0u, 1u << 20));
    app.add_option("--proxy-queue-timeout", texts.queue_timeout,
                   "Longest wait for a backend connection, then 503 (10s)")
        ->check(duration);
    app.add_option("--proxy-connect-timeout", texts.connect_timeout,
                   "Connecting to a backend longer than this: 504 (10s)")
        ->check(duration);
    app.add_option("--proxy-timeout", texts.timeout,
                   "A backend silent this long: 504, or the response is cut (60s)")
        ->check(duration);
    app.add_option("--proxy-idle-timeout", texts.idle_timeout,
                   "Idle pooled backend connections are closed after (30s)")
        ->check(duration);
    app.add_option("--proxy-head-max", texts.head_max,
                   "A backend response head larger than this is a 502 (16k)")
        ->check(size);
}

std::string finish_proxy_options(ProxyOptions& options, const ProxyOptionTexts& texts) {
    for (auto [text, out] : {std::pair{&texts.queue_timeout, &options.queue_timeout_ms},
                             std::pair{&texts.connect_timeout, &options.connect_timeout_ms},
                             std::pair{&texts.timeout, &options.timeout_ms},
                             std::pair{&texts.idle_timeout, &options.idle_timeout_ms}}) {
        if (text->empty()) continue;
        *out = *parse_duration_ms(*text);
        if (*out == 0) return "proxy timeouts must be greater than zero";
    }
    if (!texts.head_max.empty()) options.head_max = *parse_size(texts.head_max);
    return {};
}

std::string check_site_proxy(const SiteProxy& proxy) {
    for (const std::string& address : proxy.addresses)
        if (!proxy::parse_backend_url(address))
            return "proxy address '" + address +
                   "' is not http://HOST:PORT, HOST:PORT or unix:/path";
    return {};
}

} // namespace lepus
