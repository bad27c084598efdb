// ServerOptions: every setting of the server, in one place, with the command
// line that fills it. The config file (later) fills the same struct.
#pragma once

#include "http/open_beneath.h"
#include "log/access_log_format.h"
#include "net/poller.h"
#include "net/proxy_protocol.h"
#include "net/socket.h"
#include "server/config_file.h"
#include "server/proxy_options.h"
#include "server/try_files.h"
#include "server/x_accel.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lepus {

// --accept: auto (the acceptor thread when it can have a core of its own, else
// each reactor accepts for itself), acceptor, or reuseport (in the reactors).
enum class AcceptMode { Auto, Acceptor, ReusePort };

struct ServerOptions {
    std::string root = ".";
    std::vector<std::string> listen = {"8080"}; // IPv4 and IPv6 ([::] dual-stack)
    // The quic:// entries of --listen (HTTP/3, UDP), taken out of `listen`,
    // which keeps the TCP listeners; not changed by a reload.
    std::vector<std::string> quic_listen;
    unsigned threads = 0;     // 0: one reactor per online core
    bool pin_threads = false; // --pin on
    AcceptMode accept_mode = AcceptMode::Auto;
    IoBackend io = IoBackend::Epoll; // uring falls back to epoll where refused
    int backlog = 4096;
    bool defer_accept = true; // --defer-accept on|off: TCP_DEFER_ACCEPT on TCP listeners
    uint64_t notsent_lowat = uint64_t{32} * 1024; // --notsent-lowat SIZE|off (0): TCP_NOTSENT_LOWAT
    int64_t max_connections = 0;                  // 0: derived from RLIMIT_NOFILE
    // --conn-limit N: requests in progress (connections, HTTP/2 streams) per
    // client address, over every site without a conn_limit of its own; 0: off.
    unsigned conn_limit = 0;
    // --limit-memory SIZE: the client table of the limits (server/client_table.h).
    uint64_t limit_memory = uint64_t{16} << 20;

    std::string access_log = "-";
    // --access-log-format combined|json|TEXT (log/access_log_format.h), compiled.
    std::string access_log_format_text = "combined";
    std::shared_ptr<const AccessLogFormat> access_log_format;
    std::string error_log = "-";
    std::string log_level = "warn";

    uint64_t keepalive_timeout_ms = 75000;
    uint64_t keepalive_requests = 1000;
    uint64_t header_timeout_ms = 10000;
    uint64_t body_timeout_ms = 60000;
    uint64_t send_timeout_ms = 60000;
    uint64_t shutdown_timeout_ms = 10000;
    uint64_t max_body_size = 1 << 20;
    // Request bodies for scripts and backends are taken whole before a backend
    // connection is (nginx's fastcgi_request_buffering): --request-buffering
    // on|off, in memory up to --client-body-buffer, then in a file in --temp-dir.
    bool request_buffering = true;
    uint64_t client_body_buffer = uint64_t{64} * 1024;
    // Bytes a second a body must keep up over each --body-timeout interval
    // while it streams to a backend (request_buffering = false); 0: off.
    uint64_t min_body_rate = 240;
    std::string temp_dir; // set from $TMPDIR, else /tmp, when not given

    std::vector<std::string> index = {"index.html"};
    bool compress = true;      // --compress on|off: gzip, br, zstd on the fly
    bool http2 = true;         // --http2 on|off: h2 by ALPN on TLS listeners
    bool h2c = true;           // --h2c on|off: HTTP/2 with prior knowledge on plain listeners
    bool h2c_sendfile = false; // --h2c-sendfile on|off: h2c file DATA payloads by sendfile
    bool ktls = true;          // --ktls on|off: kernel TLS where Linux has its tls module
    SymlinkPolicy symlinks = SymlinkPolicy::Beneath; // --symlinks beneath|follow|owner
    bool autoindex = false;
    bool dotfiles_allow = false;
    // --try-files / --spa (config `try_files`, `spa`): the words as given, and
    // parsed (nullopt: off). A site's own try_files wins over these.
    std::vector<std::string> try_files_words;
    bool spa = false;
    std::optional<TryFiles> try_files;
    // --x-accel PREFIX=DIR (config `x_accel`): the internal folder scripts name
    // with X-Accel-Redirect / X-Sendfile (server/x_accel.h); nullopt: none.
    std::string x_accel_text;
    std::optional<XAccel> x_accel;

    // FastCGI (php-fpm). Empty fastcgi: off, everything is static.
    std::string fastcgi;                             // "unix:/path" or "HOST:PORT"
    std::vector<std::string> fastcgi_ext = {".php"}; // paths with these go to php-fpm
    unsigned fastcgi_pool = 8;                       // backend connections, summed over reactors
    unsigned fastcgi_queue = 64; // requests waiting for a connection, per reactor
    uint64_t fastcgi_queue_timeout_ms = 10000;
    uint64_t fastcgi_timeout_ms = 60000;
    uint64_t fastcgi_idle_timeout_ms = 30000;
    uint64_t fastcgi_connect_timeout_ms = 10000;
    // --fastcgi-keepalive on|off: FCGI_KEEP_CONN and idle pooled connections.
    // Off (nginx's default): php-fpm binds a child to each connection it accepts,
    // so kept-alive connections beyond pm.max_children would hang (issue 32).
    bool fastcgi_keepalive = false;
    // --fastcgi-param NAME=VALUE (config `fastcgi_params = { NAME = "VALUE" }`):
    // added to, or replacing, the CGI variables of every script (nginx's fastcgi_param).
    std::vector<std::string> fastcgi_param_texts;
    std::vector<std::pair<std::string, std::string>> fastcgi_params;

    // The HTTP reverse proxy (--proxy, --proxy-*): server/proxy_options.h.
    ProxyOptions proxy;

    // Operating it: --config, virtual hosts, the status page, privileges.
    std::string config_path; // empty: no config file
    // Where the config file set an option: "--tls-cert" -> "lepus.toml:3:1".
    std::map<std::string, std::string> config_origins;
    std::vector<SiteConfig> sites; // the [[site]] blocks of the config file
    std::string status_path;       // e.g. "/_lepus/status"; empty: off
    std::vector<std::string> status_allow = {"127.0.0.0/8", "::1/128"};
    std::string user, group; // drop to these after binding (when root)
    // --allow-root: lepus may serve as root (started as root with no --user,
    // or --user root); without it root drops to a default user (issue 33).
    bool allow_root = false;
    bool user_defaulted = false; // `user` is that default, not asked for
    std::string pid_file;        // --pid-file: written after binding, removed at exit
    std::string signal;          // -s reload|reopen|stop|quit: signal the running lepus

    // Behind a proxy: whose PROXY header and X-Forwarded-For set the client.
    std::vector<std::string> real_ip_from; // CIDRs, or "unix:"
    TrustedProxies trusted_proxies;        // real_ip_from, parsed
    bool proxy_protocol = false;           // every connection starts with a PROXY header
    // TLS for https:// listeners: the default certificate(s) (an RSA and an
    // ECDSA pair may both be given), protocols and TLS 1.2 ciphers.
    std::vector<std::string> tls_cert, tls_key;
    std::string tls_protocols = "TLSv1.2 TLSv1.3";
    std::string tls_ciphers; // empty: ECDHE + AEAD (net/tls_context.h)
    // ACME (issue 34, server/acme_options.h): certificates for --domain names
    // and for [[site]]s with tls = "acme", from --acme-ca, kept in --state-dir.
    std::vector<std::string> domains;
    std::string acme_ca = "letsencrypt"; // a directory URL, "letsencrypt" or "staging"
    std::string acme_email, acme_ca_root;
    std::string state_dir = "/var/lib/lepus";
    std::string acme_on_demand_ask; // on-demand issuance, only with this URL's yes
    std::string acme_retry = "60s"; // the first retry after a failed order; doubled each time
    uint64_t acme_retry_ms = 60000;
};

struct TlsSettings;
// The TLS settings of `options`: --tls-* and every [[site]]'s tls; the default
// certificate is --tls-cert, else the default site's, else the first site's.
TlsSettings tls_settings(const ServerOptions& options);
// Whether TLS is in use: an https:// listener, --tls-cert or a site's tls.
bool uses_tls(const ServerOptions& options);

// How long the kernel holds a connection that has sent nothing before it is
// accepted anyway (--defer-accept on): one SYN-ACK retransmission. A client
// that sends its request with the handshake's last ACK (browsers, ab, wrk,
// TLS clients with their ClientHello) is accepted at once; a silent one about
// a second later, and then meets --header-timeout as before.
inline constexpr int kDeferAcceptSeconds = 1;

// The listen(2) settings of `options` for a new TCP listener.
inline ListenOptions listen_options(const ServerOptions& options, bool reuse_port) {
    return {options.backlog, reuse_port, options.defer_accept ? kDeferAcceptSeconds : 0,
            int(options.notsent_lowat)};
}

// What parse_command_line decided.
struct CommandLineResult {
    bool run = false; // false: exit with exit_code (help, version, or an error already printed)
    int exit_code = 0;
};

// Parses and validates argv into `options`, reading `--config FILE` first (the
// command line wins). Errors are printed as one line each on stderr ("lepus: ...",
// with FILE:LINE:COLUMN for the config file) with exit code 2; --help and
// --version print and exit 0; `-t --config FILE` prints "ok" (exit 0) or the
// errors (exit 1) and does not start the server.
CommandLineResult parse_command_line(int argc, char** argv, ServerOptions& options);

} // namespace lepus
