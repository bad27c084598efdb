// The command line's options, defined group by group for CLI11 (internal to
// server/options.cc, which parses them and checks what they say together).
#pragma once

#include "server/options.h"
#include "server/proxy_options.h"

#include <CLI/CLI.hpp>
#include <string>

namespace lepus::detail {

// The option values that need converting after parsing (durations, sizes, words).
struct OptionTexts {
    std::string keepalive_timeout, header_timeout, body_timeout, send_timeout, shutdown_timeout;
    std::string fastcgi_queue_timeout, fastcgi_timeout, fastcgi_idle_timeout;
    std::string fastcgi_connect_timeout;
    std::string max_body_size, dotfiles = "deny", accept = "auto", io = "epoll";
    std::string defer_accept = "on", compress = "on", symlinks = "beneath";
    std::string notsent_lowat = "32k";
    std::string limit_memory = "16m";
    std::string fastcgi_keepalive = "off";
    std::string request_buffering = "on", client_body_buffer = "64k";
    std::string http2 = "on", h2c = "on", h2c_sendfile = "off", pin = "off", ktls = "on";
    bool no_pin = false; // the older spelling of --pin off, kept
    ProxyOptionTexts proxy;
};

// Adds every option of --help to `app`, writing into `options` (and `texts`
// for the values finish_options converts).
void add_command_line_options(CLI::App& app, ServerOptions& options, OptionTexts& texts);
// --domain, --acme-ca, --acme-email, --acme-ca-root, --state-dir (server/acme_options.cc).
void add_acme_options(CLI::App& app, ServerOptions& options);

// What is wrong with a script extension (".php"), or empty when it is one.
std::string extension_error(const std::string& text);

} // namespace lepus::detail
