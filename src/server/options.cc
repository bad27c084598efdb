#include "server/options.h"

#include "base/units.h"
#include "fastcgi/backend_address.h"
#include "log/log_level.h"
#include "net/cidr.h"
#include "net/socket.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"
#include "server/basic_auth.h"
#include "server/start_checks.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace lepus {
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
                       : "'" + text + "' is not [https://]ADDR:PORT, [V6]:PORT, PORT or unix:/PATH";
        };
    }
};

struct BackendValidator : CLI::Validator {
    BackendValidator() : CLI::Validator("unix:PATH|HOST:PORT") {
        func_ = [](std::string& text) -> std::string {
            return fastcgi::parse_backend_address(text)
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

// Turns the validated duration and size strings into numbers.
void apply_units(const std::vector<std::pair<const std::string*, uint64_t*>>& durations,
                 const std::vector<std::pair<const std::string*, uint64_t*>>& sizes) {
    for (auto& [text, out] : durations)
        if (!text->empty()) *out = *parse_duration_ms(*text);
    for (auto& [text, out] : sizes)
        if (!text->empty()) *out = *parse_size(*text);
}

// One line naming what is wrong with ROOT, or empty when it can be served.
std::string check_root(const std::string& root) {
    struct stat st;
    if (stat(root.c_str(), &st) != 0) return "root '" + root + "' does not exist";
    if (!S_ISDIR(st.st_mode)) return "root '" + root + "' is not a directory";
    if (access(root.c_str(), R_OK | X_OK) != 0) return "root '" + root + "' is not readable";
    return {};
}

// One line naming what is wrong with a [[site]]'s access_log or fastcgi (the
// config reader checked their types), or empty.
std::string check_site(const SiteConfig& site) {
    if (site.access_log && site.access_log->empty()) return "access_log must not be empty";
    if (site.proxy)
        if (std::string error = check_site_proxy(*site.proxy); !error.empty()) return error;
    if (!site.fastcgi) return {};
    const SiteFastCgi& fastcgi = *site.fastcgi;
    if (!fastcgi::parse_backend_address(fastcgi.address))
        return "fastcgi address '" + fastcgi.address + "' is not unix:/path or HOST:PORT";
    for (std::string extension : fastcgi.ext)
        if (std::string error = ExtensionValidator()(extension); !error.empty()) return error;
    return {};
}

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

// "lepus" for "/usr/sbin/lepus": the usage line names the program as it was run.
std::string program_name(const std::string& argv0) {
    size_t slash = argv0.rfind('/');
    return slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
}

// The config key of an option: "--keepalive-timeout" is keepalive_timeout.
std::string config_key(const std::string& option) {
    std::string key = option.substr(option.rfind('-', 1) == 1 ? 2 : 0);
    std::replace(key.begin(), key.end(), '-', '_');
    return key;
}

// One "FILE:LINE:COLUMN: unknown key 'NAME'" line for each key of the config
// file that names no option (all of them, as -t shows every problem).
std::string unknown_config_keys(const CLI::App& app,
                                const std::map<std::string, std::string>& origins) {
    std::string lines;
    for (auto& [option, origin] : origins)
        if (app.get_option_no_throw(option) == nullptr)
            lines += "lepus: " + origin + ": unknown key '" + config_key(option) + "'\n";
    return lines;
}

// CLI11's message about `option`, with the option written as the file's key.
std::string reword_for_file(std::string message, const std::string& option) {
    std::string key = "'" + config_key(option) + "'";
    for (size_t at = message.find(option); at != std::string::npos;
         at = message.find(option, at + key.size()))
        message.replace(at, option.size(), key);
    return message;
}

int usage_error(const std::string& message) {
    std::fprintf(stderr, "lepus: %s (see lepus --help)\n", message.c_str());
    return 2;
}

// The option values that need converting after parsing (durations, sizes, words).
struct OptionTexts {
    std::string keepalive_timeout, header_timeout, body_timeout, send_timeout, shutdown_timeout;
    std::string fastcgi_queue_timeout, fastcgi_timeout, fastcgi_idle_timeout;
    std::string max_body_size, dotfiles = "deny", accept = "auto", io = "epoll";
    std::string defer_accept = "on", compress = "on", symlinks = "beneath";
    std::string notsent_lowat = "32k";
    std::string fastcgi_keepalive = "off";
    std::string request_buffering = "on", client_body_buffer = "64k";
    std::string http2 = "on", h2c = "on", h2c_sendfile = "off", pin = "off", ktls = "on";
    bool no_pin = false; // the older spelling of --pin off, kept
    ProxyOptionTexts proxy;
};

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
    app.add_option("--listen,-l", options.listen, "Address to listen on (repeatable)")
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
                   "on: HTTP/2 with prior knowledge (h2c) on plain listeners; off")
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
    app.add_option("--fastcgi-queue", options.fastcgi_queue,
                   "Requests per reactor waiting for a FastCGI connection (64); more get 503")
        ->check(CLI::Range(0u, 1u << 20));
    app.add_option("--fastcgi-queue-timeout", fastcgi_queue_timeout,
                   "Longest wait for a FastCGI connection, then 503 (10s)")
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

// Parses `arguments` (program name first) into the options; the exit code when
// lepus must not run (help, version, a bad option), nullopt otherwise.
std::optional<int> parse_or_exit(CLI::App& app, const std::vector<std::string>& arguments,
                                 const std::map<std::string, std::string>& origins) {
    // CLI11 wants argv-style input, program name first, in reverse order of use.
    std::vector<std::string> reversed(arguments.rbegin(), arguments.rend() - 1);
    try {
        // toml++ has read any key; the file's keys are checked here, where the
        // options are known, and worded for the file.
        if (std::string error = unknown_config_keys(app, origins); !error.empty()) {
            std::fputs(error.c_str(), stderr);
            return 2;
        }
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::Success&) {
        return 0; // -V printed
    } catch (const CLI::ParseError& e) {
        std::string message = e.what();
        for (char& c : message)
            if (c == '\n') c = ' ';
        // An option that came from the config file is named as its key, at its line.
        for (auto& [option, origin] : origins)
            if (message.find(option + ":") != std::string::npos ||
                message.find(option + " ") != std::string::npos || message.ends_with(option)) {
                std::fprintf(stderr, "lepus: %s: %s\n", origin.c_str(),
                             reword_for_file(message, option).c_str());
                return 2;
            }
        return usage_error(message);
    }

    return std::nullopt;
}

// Turns the parsed texts into the options and checks what CLI11 cannot: one
// line naming the problem, or empty.
std::string finish_options(const CLI::App& app, ServerOptions& options, const OptionTexts& texts) {
    const std::string& keepalive_timeout = texts.keepalive_timeout;
    const std::string& header_timeout = texts.header_timeout;
    const std::string& body_timeout = texts.body_timeout;
    const std::string& send_timeout = texts.send_timeout;
    const std::string& shutdown_timeout = texts.shutdown_timeout;
    const std::string& fastcgi_queue_timeout = texts.fastcgi_queue_timeout;
    const std::string& fastcgi_timeout = texts.fastcgi_timeout;
    const std::string& fastcgi_idle_timeout = texts.fastcgi_idle_timeout;
    const std::string& max_body_size = texts.max_body_size;
    // CLI11 gives an option that lacks its value the next argument even when it
    // is another flag ("--index --listen X" would serve on the default address):
    // no value of ours starts with "--".
    for (const CLI::Option* option : app.get_options())
        for (const std::string& value : option->results())
            if (value.rfind("--", 0) == 0)
                return option->get_name() + " needs a value before " + value;

    apply_units({{&keepalive_timeout, &options.keepalive_timeout_ms},
                 {&header_timeout, &options.header_timeout_ms},
                 {&body_timeout, &options.body_timeout_ms},
                 {&send_timeout, &options.send_timeout_ms},
                 {&shutdown_timeout, &options.shutdown_timeout_ms},
                 {&fastcgi_queue_timeout, &options.fastcgi_queue_timeout_ms},
                 {&fastcgi_timeout, &options.fastcgi_timeout_ms},
                 {&fastcgi_idle_timeout, &options.fastcgi_idle_timeout_ms}},
                {{&max_body_size, &options.max_body_size},
                 {&texts.client_body_buffer, &options.client_body_buffer}});
    options.request_buffering = texts.request_buffering == "on";
    if (options.temp_dir.empty()) {
        const char* tmpdir = std::getenv("TMPDIR");
        options.temp_dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
    }
    if (struct stat st; stat(options.temp_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return "--temp-dir '" + options.temp_dir + "' is not a directory";
    options.pin_threads = texts.pin == "on" && !texts.no_pin;
    std::vector<Cidr> trusted;
    std::string ignored; // checked by the validator
    for (const std::string& text : options.real_ip_from)
        if (auto network = parse_cidr(text, ignored)) trusted.push_back(*network);
    options.trusted_proxies =
        TrustedProxies(std::move(trusted), std::count(options.real_ip_from.begin(),
                                                      options.real_ip_from.end(), "unix:") > 0);
    options.dotfiles_allow = texts.dotfiles == "allow";
    options.accept_mode = texts.accept == "reuseport"  ? AcceptMode::ReusePort
                          : texts.accept == "acceptor" ? AcceptMode::Acceptor
                                                       : AcceptMode::Auto;
    options.io = *parse_io_backend(texts.io);
    options.defer_accept = texts.defer_accept == "on";
    options.notsent_lowat = texts.notsent_lowat == "off" ? 0 : *parse_size(texts.notsent_lowat);
    options.compress = texts.compress == "on";
    options.http2 = texts.http2 == "on";
    options.h2c = texts.h2c == "on";
    options.h2c_sendfile = texts.h2c_sendfile == "on";
    options.ktls = texts.ktls == "on";
    options.fastcgi_keepalive = texts.fastcgi_keepalive == "on";
    options.symlinks = *parse_symlink_policy(texts.symlinks);
    if (options.header_timeout_ms == 0 || options.keepalive_timeout_ms == 0 ||
        options.body_timeout_ms == 0 || options.send_timeout_ms == 0 ||
        options.shutdown_timeout_ms == 0)
        return "timeouts must be greater than zero";
    if (options.fastcgi_queue_timeout_ms == 0 || options.fastcgi_timeout_ms == 0 ||
        options.fastcgi_idle_timeout_ms == 0)
        return "FastCGI timeouts must be greater than zero";
    // A PHP site's directories are answered by index.php first, as nginx's
    // usual "index index.php index.html"; an explicit --index wins.
    if (!options.fastcgi.empty() && app.count("--index") == 0)
        options.index = {"index.php", "index.html"};
    // A reactor's own SO_REUSEPORT copy of a listener cannot be had for a Unix
    // socket: a second bind of the path would find the first one live.
    if (options.accept_mode == AcceptMode::ReusePort &&
        std::any_of(options.listen.begin(), options.listen.end(),
                    [](const std::string& text) { return text.starts_with("unix:"); }))
        return "unix: listen addresses need --accept acceptor";
    if (options.spa && !options.try_files_words.empty())
        return "--spa and --try-files both say where unknown paths go: give one";
    if (options.spa || !options.try_files_words.empty()) {
        std::string error;
        options.try_files =
            parse_try_files(options.spa ? spa_try_files() : options.try_files_words, error);
        if (!options.try_files) return error;
    }
    if (!options.x_accel_text.empty()) {
        std::string error;
        options.x_accel = parse_x_accel(options.x_accel_text, error);
        if (!options.x_accel) return error;
    }
    if (std::string error = finish_proxy_options(options.proxy, texts.proxy); !error.empty())
        return error;
    if (!options.status_path.empty() && options.status_path.front() != '/')
        return "--status-path must start with /";
    if (options.access_log.empty() || options.error_log.empty())
        return "log paths must not be empty";
    if (std::string error = protect_from_root(options, app.count("--root") > 0); !error.empty())
        return error;
    return check_root(options.root);
}

CommandLineResult parse_arguments(const std::vector<std::string>& arguments, ServerOptions& options,
                                  const std::map<std::string, std::string>& origins) {
    CLI::App app{"lepus: a fast HTTP/1.1 server. Serves ROOT (default: the current directory).",
                 program_name(arguments.front())};
    app.set_version_flag("-v,--version", std::string("lepus ") + LEPUS_VERSION);
    app.add_flag_callback(
        "-V", [] { print_build_info(), throw CLI::Success(); },
        "Print the version, the build options and the library versions");
    bool test_config = false; // read by expand_config_argument; listed here for --help
    app.add_flag("-t,--test-config", test_config,
                 "Check the configuration (with --config) as start-up would, and exit");
    app.footer("Example:\n  lepus --listen 80 --fastcgi unix:/run/php/php-fpm.sock "
               "--index index.php,index.html /var/www/site\n\nSee lepus(1).");
    // A repeated flag takes its last value, as in most servers' command lines.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    OptionTexts texts;
    add_listening_options(app, options, texts);
    add_log_and_limit_options(app, options, texts);
    add_file_and_php_options(app, options, texts);
    add_process_options(app, options, texts);
    add_proxy_options(app, options.proxy, texts.proxy, DurationValidator(), SizeValidator());
    if (std::optional<int> code = parse_or_exit(app, arguments, origins)) return {false, *code};
    if (std::string error = finish_options(app, options, texts); !error.empty())
        return {false, usage_error(error)};
    return {true, 0};
}

} // namespace

TlsSettings tls_settings(const ServerOptions& options) {
    TlsSettings settings;
    for (size_t i = 0; i < options.tls_cert.size() && i < options.tls_key.size(); ++i)
        settings.default_certificates.push_back({options.tls_cert[i], options.tls_key[i]});
    const SiteConfig* fallback = nullptr;
    for (const SiteConfig& site : options.sites) {
        if (site.tls.empty()) continue;
        TlsSite tls{site.server_names, {}};
        for (const SiteTls& pair : site.tls)
            tls.certificates.push_back({pair.cert, pair.key});
        settings.sites.push_back(std::move(tls));
        if (!fallback || (site.is_default && !fallback->is_default)) fallback = &site;
    }
    if (settings.default_certificates.empty() && fallback)
        for (const SiteTls& pair : fallback->tls)
            settings.default_certificates.push_back({pair.cert, pair.key});
    settings.protocols = options.tls_protocols;
    settings.http2 = options.http2;
    // Asked of the kernel once: OpenSSL tries kTLS on every handshake it is
    // enabled for, and on a kernel without the module that is a failed
    // setsockopt (and, for root, a modprobe) per connection.
    settings.ktls = options.ktls && kernel_offers_ktls();
    if (!options.tls_ciphers.empty()) settings.ciphers = options.tls_ciphers;
    return settings;
}

bool uses_tls(const ServerOptions& options) {
    for (const std::string& text : options.listen)
        if (split_listen_scheme(text).tls) return true;
    for (const SiteConfig& site : options.sites)
        if (!site.tls.empty()) return true;
    return !options.tls_cert.empty() || !options.tls_key.empty();
}

CommandLineResult parse_command_line(int argc, char** argv, ServerOptions& options) {
    std::vector<std::string> arguments, errors;
    std::map<std::string, std::string> origins;
    bool check_only = false;
    bool expanded = expand_config_argument(argc, argv, arguments, options.sites, origins,
                                           check_only, options.config_path, errors);
    int error_exit = check_only ? 1 : 2;
    for (const std::string& error : errors)
        std::fprintf(stderr, "lepus: %s\n", error.c_str());
    if (!expanded && arguments.size() <= 1) return {false, error_exit};
    CommandLineResult result = parse_arguments(arguments, options, origins);
    if (!expanded) return {false, error_exit};
    if (!result.run) return {false, result.exit_code == 0 ? 0 : error_exit};
    for (const SiteConfig& site : options.sites)
        if (std::string error = check_site(site); !error.empty())
            return {false, (usage_error(site.origin + ": " + error), error_exit)};
    for (const SiteConfig& site : options.sites)
        if (std::string error = check_root(site.root); !error.empty())
            return {false, (usage_error(site.origin + ": " + error), error_exit)};
    // The htpasswd files of the sites' auth rules: read now, so that a bad
    // one stops the start, `-t` and a reload (the running files stay).
    if (std::string error; !load_site_auth(options.sites, error))
        return {false, (usage_error(error), error_exit)};
    if (std::string error = check_tls(options); !error.empty())
        return {false, (usage_error(error), error_exit)};
    if (check_only) {
        std::vector<std::string> errors = check_start_up(options);
        for (const std::string& error : errors)
            std::fprintf(stderr, "lepus: %s\n", error.c_str());
        if (!errors.empty()) return {false, error_exit};
        std::printf("ok\n");
        return {false, 0};
    }
    return result;
}

} // namespace lepus
