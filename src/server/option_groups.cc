// The options of --help, one function per group. See detail/option_groups.h.
#include "server/detail/option_groups.h"

#include "base/units.h"
#include "fastcgi/cgi_params.h"
#include "log/log_level.h"
#include "net/cidr.h"
#include "net/socket.h"
#include "net/tls_listen_scheme.h"
#include "upstream/backend_address.h"

#include <algorithm>
#include <string>

namespace lepus::detail {
namespace {

// CLI11 validators that share the duration and size parsers with the config file.
constexpr uint64_t kMaxDurationMs = 7ull * 24 * 3600 * 1000;

struct DurationValidator : CLI::Validator {
    DurationValidator() : CLI::Validator("DURATION") {
        func_ = [](std::string& text) -> std::string {
            auto ms = parse_duration_ms(text);
            if (!ms) return "'" + text + "' is not a duration (e.g. 30, 500ms, 10s, 2m)";
            // Deadlines are now + duration: keep them far from overflow.
            if (*ms > kMaxDurationMs) return "'" + text + "' is longer than a week";
            return {};
        };
    }
};

struct SizeValidator : CLI::Validator {
    SizeValidator() : CLI::Validator("SIZE") {
        func_ = [](std::string& text) -> std::string {
            auto size = parse_size(text);
            if (!size) return "'" + text + "' is not a size (e.g. 4096, 64k, 1m, 1g)";
            if (*size == 0) return "size must be greater than zero";
            return {};
        };
    }
};

struct ListenValidator : CLI::Validator {
    ListenValidator() : CLI::Validator("ADDR:PORT") {
        func_ = [](std::string& text) -> std::string {
            return parse_listen(split_listen_scheme(text).address)
                       ? std::string()
                       : "'" + text +
                             "' is not [https://|quic://|h2c://]ADDR:PORT, [V6]:PORT, PORT or "
                             "unix:/PATH";
        };
    }
};

struct BackendValidator : CLI::Validator {
    BackendValidator() : CLI::Validator("unix:PATH|HOST:PORT") {
        func_ = [](std::string& text) -> std::string {
            return upstream::parse_backend_address(text)
                       ? std::string()
                       : "'" + text + "' is not unix:/path or HOST:PORT";
        };
    }
};

struct ExtensionValidator : CLI::Validator {
    ExtensionValidator() : CLI::Validator("EXT") {
        func_ = [](std::string& text) -> std::string {
            bool ok = text.size() >= 2 && text[0] == '.' && text.find('/') == std::string::npos &&
                      text.find('\0') == std::string::npos;
            return ok ? std::string() : "'" + text + "' is not an extension such as .php";
        };
    }
};

// A list option takes one value per occurrence (repeat the flag) or a
// comma-separated list: with CLI11's default of "every following word", the
// positional root after `--index a.html index.html ROOT` was taken as an index.
CLI::Option* list_option(CLI::Option* option) {
    return option->expected(1)->allow_extra_args(false)->delimiter(',')->multi_option_policy(
        CLI::MultiOptionPolicy::TakeAll);
}

constexpr const char* kFiles = "Files";
constexpr const char* kLimits = "Limits";
constexpr const char* kProcess = "Process";

// The options, one function per group of --help.
void add_listening_options(CLI::App& app, ServerOptions& options, OptionTexts& texts) {
    ListenValidator listen_address;
    std::string& accept = texts.accept;
    std::string& io = texts.io;
    bool& no_pin = texts.no_pin;
    app.add_option("root,--root", options.root, "Directory to serve")
        ->capture_default_str()
        ->group(kFiles);
    app.add_option("-c,--config", options.config_path,
                   "TOML config file; the command line wins over it (-t checks it)");
    app.option_defaults()->group("Listening");
    app.add_option("--listen,-l", options.listen,
                   "Address to listen on (repeatable); with ACME (--domain) and no "
                   "--listen: 80 and https://443; quic://ADDR:PORT: HTTP/3 on UDP; "
                   "h2c://ADDR:PORT: HTTP/2 with prior knowledge only")
        ->check(listen_address)
        ->capture_default_str()
        ->expected(1) // one address per --listen, so `--listen :80 ROOT` works
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.option_defaults()->group(kProcess);
    app.add_option("--threads", options.threads, "Reactor threads (default: online cores)")
        ->check(CLI::Range(1u, 1024u));
    // Off by default: with the cores shared (a load generator, php-fpm, a
    // database) pinned reactors lost 23-33% of their req/s in lepus-bench's
    // unpinned rounds, and alone on its cores lepus gains nothing measurable
    // from pinning (docs/BENCHMARKS.md, issue 15).
    app.add_option("--pin", texts.pin,
                   "on: pin reactor thread i to core i (for cores lepus has to itself); off")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_flag("--no-pin", no_pin, "Do not pin reactor threads to cores (as --pin off)");
    app.add_option("--accept", accept,
                   "auto, acceptor (one thread hands off) or reuseport (each reactor accepts)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "acceptor", "reuseport"}));
    app.add_option("--io", io, "Event engine: epoll (default) or uring (io_uring)")
        ->check(CLI::IsMember({"epoll", "uring"}));
    list_option(app.add_option("--real-ip-from", options.real_ip_from,
                               "Trusted proxies (CIDR or unix:; repeat, or a,b): their "
                               "X-Forwarded-For or PROXY header gives the client address"))
        ->group("Listening")
        ->check(CLI::Validator(
            [](std::string& cidr) {
                std::string error;
                return cidr == "unix:" || parse_cidr(cidr, error) ? std::string() : error;
            },
            "CIDR"));
    app.add_flag("--proxy-protocol", options.proxy_protocol,
                 "Every connection starts with a PROXY protocol v1/v2 header (haproxy)")
        ->group("Listening");
    app.add_option("--backlog", options.backlog, "Listen backlog")
        ->group("Listening")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--defer-accept", texts.defer_accept,
                   "on: accept a TCP connection once its request arrived (TCP_DEFER_ACCEPT)")
        ->group("Listening")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--notsent-lowat", texts.notsent_lowat,
                   "SIZE or off: how much a connection may hold written but not yet sent "
                   "(TCP_NOTSENT_LOWAT)")
        ->group("Listening")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                if (text == "off") return {};
                auto size = parse_size(text);
                if (!size || *size == 0 || *size > (uint64_t{1} << 30))
                    return "'" + text + "' is not off or a size from 1 to 1g (e.g. 32k)";
                return {};
            },
            "SIZE|off"));
    app.add_option("--http2", texts.http2, "on: HTTP/2 (h2) by ALPN on TLS listeners; off")
        ->group("Listening")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--h2c", texts.h2c,
                   "on: HTTP/2 with prior knowledge (h2c) on plain listeners; off (not with "
                   "an h2c:// listener)")
        ->group("Listening")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--h2c-sendfile", texts.h2c_sendfile,
                   "on: h2c file bodies by sendfile after each DATA header; off: pread (faster "
                   "with 16 KiB frames)")
        ->group("Listening")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.option_defaults()->group(kLimits);
    app.add_option("--max-connections", options.max_connections,
                   "Connections above this get 503 (default: from RLIMIT_NOFILE)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    app.add_option("--conn-limit", options.conn_limit,
                   "Requests in progress (connections, HTTP/2 streams) per client address; "
                   "above it 503 (0: off)")
        ->check(CLI::Range(0u, 1u << 20));
    app.add_option("--limit-memory", texts.limit_memory,
                   "Memory for the per-client state of the limits (LRU beyond it)")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                auto size = parse_size(text);
                if (!size || *size < (uint64_t{64} << 10) || *size > (uint64_t{64} << 30))
                    return "'" + text + "' is not a size from 64k to 64g (e.g. 16m)";
                return {};
            },
            "SIZE"));
}

void add_log_and_limit_options(CLI::App& app, ServerOptions& options, OptionTexts& texts) {
    DurationValidator duration;
    SizeValidator size;
    std::string& keepalive_timeout = texts.keepalive_timeout;
    std::string& header_timeout = texts.header_timeout;
    std::string& body_timeout = texts.body_timeout;
    std::string& send_timeout = texts.send_timeout;
    std::string& shutdown_timeout = texts.shutdown_timeout;
    std::string& max_body_size = texts.max_body_size;
    app.option_defaults()->group("Logs");
    app.add_option("--access-log", options.access_log, "Access log: PATH, - (stderr) or off")
        ->capture_default_str();
    app.add_option("--access-log-format", options.access_log_format_text,
                   "combined, json (one object per line) or nginx's log_format text with "
                   "$variables ('$remote_addr \"$request\" $status $request_time')")
        ->capture_default_str();
    app.add_option("--error-log", options.error_log, "Error log: PATH or - (stderr)")
        ->capture_default_str();
    app.add_option("--log-level", options.log_level, "error, warn, info or debug")
        ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
        ->capture_default_str();
    app.option_defaults()->group(kLimits);
    app.add_option("--keepalive-timeout", keepalive_timeout, "Idle keepalive timeout (75s)")
        ->check(duration);
    app.add_option("--keepalive-requests", options.keepalive_requests,
                   "Requests per keepalive connection (1000)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
    app.add_option("--header-timeout", header_timeout, "Deadline for a whole request head (10s)")
        ->check(duration);
    app.add_option("--body-timeout", body_timeout, "Idle timeout while reading a body (60s)")
        ->check(duration);
    app.add_option("--send-timeout", send_timeout, "Write stall timeout (60s)")->check(duration);
    app.add_option("--shutdown-timeout", shutdown_timeout, "Grace period on SIGTERM (10s)")
        ->check(duration);
    app.add_option("--max-body-size", max_body_size, "Largest request body (1m)")->check(size);
    app.add_option("--request-buffering", texts.request_buffering,
                   "on: take a body whole before a script or backend gets it (a slow client "
                   "holds no backend connection); off: stream it")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--min-body-rate", options.min_body_rate,
                   "Bytes/s a body streamed to a backend (request buffering off) must keep up "
                   "over each --body-timeout, or it is cut off (0: off)")
        ->capture_default_str()
        ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30)); // no overflow times a timeout
    app.add_option("--client-body-buffer", texts.client_body_buffer,
                   "Body bytes kept in memory; a larger body goes to a file in --temp-dir")
        ->capture_default_str()
        ->check(size);
    app.add_option("--temp-dir", options.temp_dir,
                   "Directory for request body files, unnamed (default: $TMPDIR or /tmp)");
}

void add_file_and_php_options(CLI::App& app, ServerOptions& options, OptionTexts& texts) {
    DurationValidator duration;
    BackendValidator backend;
    ExtensionValidator extension;
    std::string& dotfiles = texts.dotfiles;
    std::string& fastcgi_queue_timeout = texts.fastcgi_queue_timeout;
    std::string& fastcgi_timeout = texts.fastcgi_timeout;
    std::string& fastcgi_idle_timeout = texts.fastcgi_idle_timeout;
    app.option_defaults()->group(kFiles);
    list_option(app.add_option("--index", options.index,
                               "Index file names for directories (repeat, or a,b)"))
        ->capture_default_str();
    app.add_flag("--autoindex", options.autoindex, "List directories without an index");
    app.add_option("--symlinks", texts.symlinks,
                   "beneath (links that stay under the root), follow, or owner (same owner "
                   "as the target)")
        ->capture_default_str()
        ->check(CLI::IsMember({"beneath", "follow", "owner"}));
    app.add_option("--compress", texts.compress,
                   "on: gzip, br or zstd for text responses, as the client accepts; off")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--dotfiles", dotfiles, "deny (404 for names starting with '.') or allow")
        ->check(CLI::IsMember({"deny", "allow"}));
    app.add_option("--try-files", options.try_files_words,
                   "nginx's try_files: '$uri $uri/ /index.php?$query_string' (front controller)")
        ->expected(1) // one word per --try-files (it may hold several candidates)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--x-accel", options.x_accel_text,
                   "PREFIX=DIR: files scripts hand over with X-Accel-Redirect: PREFIX/name or "
                   "X-Sendfile: DIR/name (e.g. /protected/=/srv/files)");
    app.add_flag("--spa", options.spa,
                 "Single-page application: unknown paths get /index.html (try_files $uri $uri/ "
                 "/index.html)");

    app.option_defaults()->group("PHP (FastCGI)");
    app.add_option("--fastcgi", options.fastcgi,
                   "Send scripts to this FastCGI server (php-fpm): unix:/path or HOST:PORT")
        ->check(backend);
    list_option(app.add_option("--fastcgi-ext", options.fastcgi_ext,
                               "Script extensions (.php; repeat, or .php,.phtml)"))
        ->check(extension);
    app.add_option("--fastcgi-pool", options.fastcgi_pool,
                   "FastCGI connections in all, split over the reactors (8)")
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--fastcgi-keepalive", texts.fastcgi_keepalive,
                   "on: keep FastCGI connections open between requests (then keep "
                   "--fastcgi-pool at or below php-fpm's pm.max_children); off: one per request")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--fastcgi-param", options.fastcgi_param_texts,
                   "NAME=VALUE: a CGI variable every script gets, or replaces "
                   "(SERVER_SOFTWARE=nginx; repeat)")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(CLI::Validator(
            [](std::string& text) {
                size_t equals = text.find('=');
                if (equals == std::string::npos) return std::string("expected NAME=VALUE");
                return fastcgi::cgi_param_name_error(std::string_view(text).substr(0, equals));
            },
            "NAME=VALUE"));
    app.add_option("--fastcgi-queue", options.fastcgi_queue,
                   "Requests per reactor waiting for a FastCGI connection (64); more get 503")
        ->check(CLI::Range(0u, 1u << 20));
    app.add_option("--fastcgi-queue-timeout", fastcgi_queue_timeout,
                   "Longest wait for a FastCGI connection, then 503 (10s)")
        ->check(duration);
    app.add_option("--fastcgi-connect-timeout", texts.fastcgi_connect_timeout,
                   "Connecting to php-fpm longer than this: 504 (10s)")
        ->check(duration);
    app.add_option("--fastcgi-timeout", fastcgi_timeout,
                   "php-fpm silent this long: 504, connection closed (60s)")
        ->check(duration);
    app.add_option("--fastcgi-idle-timeout", fastcgi_idle_timeout,
                   "Idle kept-alive FastCGI connections are closed after (30s)")
        ->check(duration);
}

void add_process_options(CLI::App& app, ServerOptions& options, OptionTexts& texts) {
    app.option_defaults()->group(kProcess);
    app.add_option("--status-path", options.status_path,
                   "Serve the status page (JSON; ?format=prometheus) at this path");
    list_option(app.add_option("--status-allow", options.status_allow,
                               "Networks allowed to read the status page (repeat, or a,b)"))
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& cidr) {
                std::string error;
                return parse_cidr(cidr, error) ? std::string() : error;
            },
            "CIDR"));
    app.add_option("--tls-cert", options.tls_cert,
                   "Certificate (PEM, chain included) for https:// listeners (repeatable)")
        ->expected(1) // one file per flag, so `--tls-key key.pem ROOT` keeps ROOT
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--tls-key", options.tls_key, "Private key (PEM) of each --tls-cert")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--tls-protocols", options.tls_protocols,
                   "TLS versions: TLSv1.2 and/or TLSv1.3 (both)")
        ->capture_default_str();
    app.add_option("--tls-ciphers", options.tls_ciphers,
                   "TLS 1.2 cipher list, OpenSSL syntax (ECDHE with AES-GCM or ChaCha20)");
    app.add_option("--ktls", texts.ktls,
                   "on: the kernel encrypts TLS records and files go out by SSL_sendfile, where "
                   "Linux has its tls module; off")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--user", options.user,
                   "Run as this user after binding (when started as root; default www-data, "
                   "else nobody)");
    app.add_flag("--allow-root", options.allow_root,
                 "Serve as root when started as root (without --user, or with --user root)");
    app.add_option("--pid-file", options.pid_file,
                   "Write the process id to this file after binding (e.g. /run/lepus.pid)");
    app.add_option("-s,--signal", options.signal,
                   "Signal the lepus of --pid-file: reload, reopen (logs), stop or quit")
        ->check(CLI::IsMember({"reload", "reopen", "stop", "quit"}));
    app.add_option("--group", options.group, "Run as this group after binding");
}

} // namespace

std::string extension_error(const std::string& text) {
    return ExtensionValidator()(text);
}

void add_command_line_options(CLI::App& app, ServerOptions& options, OptionTexts& texts) {
    add_listening_options(app, options, texts);
    add_log_and_limit_options(app, options, texts);
    add_file_and_php_options(app, options, texts);
    add_process_options(app, options, texts);
    add_acme_options(app, options);
    add_proxy_options(app, options.proxy, texts.proxy, DurationValidator(), SizeValidator());
}

} // namespace lepus::detail
