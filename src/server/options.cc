#include "server/options.h"

#include "base/units.h"
#include "fastcgi/backend_address.h"
#include "log/log_level.h"
#include "net/cidr.h"
#include "net/socket.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
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
            return parse_listen_address(split_listen_scheme(text).address)
                       ? std::string()
                       : "'" + text + "' is not [https://]ADDR:PORT, [V6]:PORT or PORT";
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
    if (!site.fastcgi) return {};
    const SiteFastCgi& fastcgi = *site.fastcgi;
    if (!fastcgi::parse_backend_address(fastcgi.address))
        return "fastcgi address '" + fastcgi.address + "' is not unix:/path or HOST:PORT";
    for (std::string extension : fastcgi.ext)
        if (std::string error = ExtensionValidator()(extension); !error.empty()) return error;
    return {};
}

// Loads and matches every certificate and key the TLS listeners would use:
// one line naming the wrong file, or empty.
std::string check_tls(const ServerOptions& options) {
    if (!uses_tls(options)) return {};
    if (options.tls_cert.size() != options.tls_key.size())
        return "--tls-cert and --tls-key come in pairs (" +
               std::to_string(options.tls_cert.size()) + " certificates, " +
               std::to_string(options.tls_key.size()) + " keys)";
    std::string error;
    SslContextRef context = build_tls_context(tls_settings(options), error);
    return context ? std::string() : error;
}

int usage_error(const std::string& message) {
    std::fprintf(stderr, "lepus: %s (see lepus --help)\n", message.c_str());
    return 2;
}

CommandLineResult parse_arguments(const std::vector<std::string>& arguments, ServerOptions& options,
                                  const std::map<std::string, std::string>& origins) {
    CLI::App app{"lepus: a fast HTTP/1.1 server. Serves ROOT (default: the current directory)."};
    app.set_version_flag("--version", std::string("lepus ") + LEPUS_VERSION);
    // A repeated flag takes its last value, as in most servers' command lines.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    DurationValidator duration;
    SizeValidator size;
    ListenValidator listen_address;

    std::string keepalive_timeout, header_timeout, body_timeout, send_timeout, shutdown_timeout;
    std::string fastcgi_queue_timeout, fastcgi_timeout, fastcgi_idle_timeout;
    BackendValidator backend;
    ExtensionValidator extension;
    std::string max_body_size, dotfiles = "deny", accept = "acceptor", io = "epoll";
    bool no_pin = false;

    app.add_option("root,--root", options.root, "Directory to serve")->capture_default_str();
    app.add_option("-c,--config", options.config_path,
                   "TOML config file; the command line wins over it (-t checks it)");
    app.add_option("--listen,-l", options.listen, "Address to listen on (repeatable)")
        ->check(listen_address)
        ->capture_default_str()
        ->expected(1) // one address per --listen, so `--listen :80 ROOT` works
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--threads", options.threads, "Reactor threads (default: online cores)")
        ->check(CLI::Range(1u, 1024u));
    app.add_flag("--no-pin", no_pin, "Do not pin reactor threads to cores");
    app.add_option("--accept", accept, "acceptor (one thread hands off) or reuseport")
        ->check(CLI::IsMember({"acceptor", "reuseport"}));
    app.add_option("--io", io, "Event engine: epoll (default) or uring (io_uring)")
        ->check(CLI::IsMember({"epoll", "uring"}));
    app.add_option("--backlog", options.backlog, "Listen backlog")->check(CLI::Range(1, 1 << 20));
    app.add_option("--max-connections", options.max_connections,
                   "Connections above this get 503 (default: from RLIMIT_NOFILE)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    app.add_option("--access-log", options.access_log, "Access log: PATH, - (stderr) or off")
        ->capture_default_str();
    app.add_option("--error-log", options.error_log, "Error log: PATH or - (stderr)")
        ->capture_default_str();
    app.add_option("--log-level", options.log_level, "error, warn, info or debug")
        ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
        ->capture_default_str();
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
    app.add_option("--index", options.index, "Index file names for directories")
        ->capture_default_str()
        ->expected(1, 64)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_flag("--autoindex", options.autoindex, "List directories without an index");
    app.add_option("--dotfiles", dotfiles, "deny (404 for names starting with '.') or allow")
        ->check(CLI::IsMember({"deny", "allow"}));

    app.add_option("--fastcgi", options.fastcgi,
                   "Send scripts to this FastCGI server (php-fpm): unix:/path or HOST:PORT")
        ->check(backend);
    app.add_option("--fastcgi-ext", options.fastcgi_ext, "Script extensions (.php)")
        ->check(extension)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--fastcgi-pool", options.fastcgi_pool,
                   "FastCGI connections in all, split over the reactors (8)")
        ->check(CLI::Range(1u, 65536u));
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
                   "Idle pooled FastCGI connections are closed after (30s)")
        ->check(duration);

    app.add_option("--status-path", options.status_path,
                   "Serve the status page (JSON; ?format=prometheus) at this path");
    app.add_option("--status-allow", options.status_allow,
                   "Networks allowed to read the status page (127.0.0.0/8 ::1/128)")
        ->capture_default_str()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
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
    app.add_option("--user", options.user, "Run as this user after binding (when started as root)");
    app.add_option("--group", options.group, "Run as this group after binding");

    // CLI11 wants argv-style input, program name first, in reverse order of use.
    std::vector<std::string> reversed(arguments.rbegin(), arguments.rend() - 1);
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return {false, app.exit(e)};
    } catch (const CLI::CallForAllHelp& e) {
        return {false, app.exit(e)};
    } catch (const CLI::CallForVersion& e) {
        return {false, app.exit(e)};
    } catch (const CLI::ParseError& e) {
        std::string message = e.what();
        for (char& c : message)
            if (c == '\n') c = ' ';
        // Name the config file line when the option came from there.
        for (auto& [option, origin] : origins)
            if (message.find(option + ":") != std::string::npos ||
                message.find(option + " ") != std::string::npos || message.ends_with(option)) {
                message = origin + ": " + message;
                break;
            }
        return {false, usage_error(message)};
    }

    // CLI11 gives an option that lacks its value the next argument even when it
    // is another flag ("--index --listen X" would serve on the default address):
    // no value of ours starts with "--".
    for (const CLI::Option* option : app.get_options())
        for (const std::string& value : option->results())
            if (value.rfind("--", 0) == 0)
                return {false, usage_error(option->get_name() + " needs a value before " + value)};

    apply_units({{&keepalive_timeout, &options.keepalive_timeout_ms},
                 {&header_timeout, &options.header_timeout_ms},
                 {&body_timeout, &options.body_timeout_ms},
                 {&send_timeout, &options.send_timeout_ms},
                 {&shutdown_timeout, &options.shutdown_timeout_ms},
                 {&fastcgi_queue_timeout, &options.fastcgi_queue_timeout_ms},
                 {&fastcgi_timeout, &options.fastcgi_timeout_ms},
                 {&fastcgi_idle_timeout, &options.fastcgi_idle_timeout_ms}},
                {{&max_body_size, &options.max_body_size}});
    options.pin_threads = !no_pin;
    options.dotfiles_allow = dotfiles == "allow";
    options.accept_mode = accept == "reuseport" ? AcceptMode::ReusePort : AcceptMode::Acceptor;
    options.io = *parse_io_backend(io);
    if (options.header_timeout_ms == 0 || options.keepalive_timeout_ms == 0 ||
        options.body_timeout_ms == 0 || options.send_timeout_ms == 0 ||
        options.shutdown_timeout_ms == 0)
        return {false, usage_error("timeouts must be greater than zero")};
    if (options.fastcgi_queue_timeout_ms == 0 || options.fastcgi_timeout_ms == 0 ||
        options.fastcgi_idle_timeout_ms == 0)
        return {false, usage_error("FastCGI timeouts must be greater than zero")};
    // A PHP site's directories are answered by index.php first, as nginx's
    // usual "index index.php index.html"; an explicit --index wins.
    if (!options.fastcgi.empty() && app.count("--index") == 0)
        options.index = {"index.php", "index.html"};
    if (!options.status_path.empty() && options.status_path.front() != '/')
        return {false, usage_error("--status-path must start with /")};
    if (options.access_log.empty() || options.error_log.empty())
        return {false, usage_error("log paths must not be empty")};
    if (std::string error = check_root(options.root); !error.empty())
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
    if (std::string error = check_tls(options); !error.empty())
        return {false, (usage_error(error), error_exit)};
    if (check_only) {
        std::printf("ok\n");
        return {false, 0};
    }
    return result;
}

} // namespace lepus
