#include "server/options.h"

#include "base/units.h"
#include "fastcgi/cgi_params.h"
#include "log/log_level.h"
#include "net/certificate_check.h"
#include "net/cidr.h"
#include "net/socket.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"
#include "server/acme_options.h"
#include "server/basic_auth.h"
#include "server/detail/option_groups.h"
#include "server/start_checks.h"
#include "upstream/backend_address.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace lepus {
namespace {

using detail::add_command_line_options;
using detail::extension_error;
using detail::OptionTexts;

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
    for (const std::string& address : fastcgi.addresses)
        if (!upstream::parse_backend_address(address))
            return "fastcgi address '" + address + "' is not unix:/path or HOST:PORT";
    for (const std::string& extension : fastcgi.ext)
        if (std::string error = extension_error(extension); !error.empty()) return error;
    return {};
}

// Where the config file set `option`, or empty.
std::string config_origin(const std::map<std::string, std::string>& origins,
                          const std::string& option) {
    auto it = origins.find(option);
    return it == origins.end() ? std::string() : it->second;
}

// A certificate that loads but that clients will refuse (expired, not for
// the site's names) or whose chain is out of order: warned about, not refused,
// as nginx starts with one (a renewal may be on its way).
void warn_about_certificate(const std::string& cert_path, const std::vector<std::string>& names,
                            const std::string& origin) {
    for (const std::string& warning : certificate_warnings(cert_path, names, std::time(nullptr)))
        std::fprintf(stderr, "lepus: warning: %s%s%s\n", origin.c_str(), origin.empty() ? "" : ": ",
                     warning.c_str());
}

// Issue 33: what is accepted but probably not meant, one "lepus: warning:"
// line each on stderr (-t prints them; the start goes on): a server name
// that an earlier site already answers (nginx: "conflicting server name"),
// https_redirect with no https:// listener to redirect to, --proxy-protocol
// with a quic:// listener.
void warn_about_sites(const ServerOptions& options) {
    // The PROXY protocol is a preamble on a TCP stream; QUIC's UDP datagrams have none.
    if (options.proxy_protocol && !options.quic_listen.empty()) {
        std::string origin = config_origin(options.config_origins, "--proxy-protocol");
        std::fprintf(stderr,
                     "lepus: warning: %s%s%s applies to TCP listeners only: quic:// (UDP) "
                     "clients are seen at their own address\n",
                     origin.c_str(), origin.empty() ? "" : ": ",
                     origin.empty() ? "--proxy-protocol" : "proxy_protocol");
    }
    std::map<std::string, const SiteConfig*> owners;
    bool tls_listener =
        std::any_of(options.listen.begin(), options.listen.end(),
                    [](const std::string& text) { return split_listen_scheme(text).tls; });
    std::string tls_origin = config_origin(options.config_origins, "--tls-cert");
    for (const std::string& cert : options.tls_cert)
        warn_about_certificate(cert, {}, tls_origin);
    for (const SiteConfig& site : options.sites) {
        for (std::string name : site.server_names) {
            std::transform(name.begin(), name.end(), name.begin(),
                           [](unsigned char c) { return char(std::tolower(c)); });
            auto [it, first] = owners.emplace(name, &site);
            if (!first && it->second != &site)
                std::fprintf(stderr,
                             "lepus: warning: %s: server name '%s' is also the site's at %s, "
                             "which answers it; this one never will\n",
                             site.origin.c_str(), name.c_str(), it->second->origin.c_str());
        }
        for (const SiteTls& pair : site.tls)
            warn_about_certificate(pair.cert, site.server_names,
                                   pair.origin.empty() ? site.origin : pair.origin);
        if (site.https_redirect && !tls_listener)
            std::fprintf(stderr,
                         "lepus: warning: %s: https_redirect sends clients to port %u, but no "
                         "listen address is https:// (fine if TLS ends in front of lepus)\n",
                         site.origin.c_str(), unsigned(site.https_redirect));
    }
}

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

// A message about options, for an admin who wrote a config file (issue 33):
// each option the file set is named by its key, and the message starts with
// the file and line of the first ("lepus.toml:4:1: 'temp_dir' '/x' is not a
// directory", not "--temp-dir '/x' is not a directory").
std::string in_config_terms(std::string message,
                            const std::map<std::string, std::string>& origins) {
    std::string origin;
    for (size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at)) {
        size_t end = message.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-", at + 2);
        std::string option = message.substr(at, end == std::string::npos ? end : end - at);
        std::string where = config_origin(origins, option);
        if (where.empty()) {
            at += option.size();
            continue;
        }
        if (origin.empty()) origin = where;
        std::string key = "'" + config_key(option) + "'";
        message.replace(at, option.size(), key);
        at += key.size();
    }
    return origin.empty() ? message : origin + ": " + message;
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
                 {&fastcgi_idle_timeout, &options.fastcgi_idle_timeout_ms},
                 {&texts.fastcgi_connect_timeout, &options.fastcgi_connect_timeout_ms}},
                {{&max_body_size, &options.max_body_size},
                 {&texts.client_body_buffer, &options.client_body_buffer},
                 {&texts.limit_memory, &options.limit_memory}});
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
    options.fastcgi_params.clear();
    for (const std::string& text : options.fastcgi_param_texts) {
        size_t equals = text.find('='); // the validator saw one
        fastcgi::CgiParam param{text.substr(0, equals), text.substr(equals + 1)};
        fastcgi::merge_cgi_params(options.fastcgi_params, {&param, 1});
    }
    options.symlinks = *parse_symlink_policy(texts.symlinks);
    if (options.header_timeout_ms == 0 || options.keepalive_timeout_ms == 0 ||
        options.body_timeout_ms == 0 || options.send_timeout_ms == 0 ||
        options.shutdown_timeout_ms == 0)
        return "timeouts must be greater than zero";
    if (options.fastcgi_queue_timeout_ms == 0 || options.fastcgi_timeout_ms == 0 ||
        options.fastcgi_idle_timeout_ms == 0 || options.fastcgi_connect_timeout_ms == 0)
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
    // "lepus --domain example.org ./site" is all it takes, as with Caddy: with
    // no --listen at all an ACME server listens where a CA and browsers look,
    // port 80 (HTTP-01, redirects) and 443 (TLS-ALPN-01, the site).
    if (uses_acme(options) && app.count("--listen") == 0) options.listen = {"80", "https://443"};
    options.quic_listen.clear();
    std::erase_if(options.listen, [&](const std::string& text) {
        if (!split_listen_scheme(text).quic) return false;
        options.quic_listen.push_back(text);
        return true;
    });
    // nginx's `listen 80 http2;` with HTTP/2 turned off would be a port that speaks nothing.
    if (!options.h2c)
        for (const std::string& text : options.listen)
            if (split_listen_scheme(text).h2c)
                return text + " speaks HTTP/2 only, and --h2c off turns HTTP/2 off on plain "
                              "listeners: drop one of them";
    if (std::string error = finish_acme_options(options); !error.empty()) return error;
    if (!options.status_path.empty() && options.status_path.front() != '/')
        return "--status-path must start with /";
    if (options.access_log.empty() || options.error_log.empty())
        return "log paths must not be empty";
    {
        std::string error;
        auto format = AccessLogFormat::compile(options.access_log_format_text, error);
        if (!format) return error;
        options.access_log_format = std::make_shared<const AccessLogFormat>(std::move(*format));
    }
    if (std::string error = protect_from_root(options, app.count("--root") > 0); !error.empty())
        return error;
    return check_root(options.root);
}

CommandLineResult parse_arguments(const std::vector<std::string>& arguments, ServerOptions& options,
                                  const std::map<std::string, std::string>& origins) {
    CLI::App app{"lepus: a fast HTTP server (HTTP/1.1, HTTP/2, TLS, PHP, proxy). Serves ROOT "
                 "(default: the current directory).",
                 program_name(arguments.front())};
    app.set_version_flag("-v,--version", std::string("lepus ") + LEPUS_VERSION);
    app.add_flag_callback(
        "-V", [] { print_build_info(), throw CLI::Success(); },
        "Print the version, the build options and the library versions");
    bool test_config = false; // read by expand_config_argument; listed here for --help
    app.add_flag("-t,--test-config", test_config,
                 "Check the configuration (--config, default /etc/lepus/lepus.toml) as start-up "
                 "would, as root also what the service user can read, and exit");
    app.footer("Example:\n  lepus --listen 80 --fastcgi unix:/run/php/php-fpm.sock "
               "--index index.php,index.html /var/www/site\n\nSee lepus(8).");
    // A repeated flag takes its last value, as in most servers' command lines.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    OptionTexts texts;
    add_command_line_options(app, options, texts);
    if (std::optional<int> code = parse_or_exit(app, arguments, origins)) return {false, *code};
    if (std::string error = finish_options(app, options, texts); !error.empty())
        return {false, usage_error(in_config_terms(error, origins))};
    return {true, 0};
}

} // namespace

TlsSettings tls_settings(const ServerOptions& options) {
    TlsSettings settings;
    std::string origin = config_origin(options.config_origins, "--tls-cert");
    for (size_t i = 0; i < options.tls_cert.size() && i < options.tls_key.size(); ++i)
        settings.default_certificates.push_back({options.tls_cert[i], options.tls_key[i], origin});
    const SiteConfig* fallback = nullptr;
    for (const SiteConfig& site : options.sites) {
        if (site.tls.empty()) continue;
        TlsSite tls{site.server_names, {}};
        for (const SiteTls& pair : site.tls)
            tls.certificates.push_back({pair.cert, pair.key, pair.origin});
        settings.sites.push_back(std::move(tls));
        if (!fallback || (site.is_default && !fallback->is_default)) fallback = &site;
    }
    if (settings.default_certificates.empty() && fallback)
        for (const SiteTls& pair : fallback->tls)
            settings.default_certificates.push_back({pair.cert, pair.key, pair.origin});
    add_acme_certificates(options, settings);
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
    return uses_acme(options) || !options.tls_cert.empty() || !options.tls_key.empty();
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
    options.config_origins = origins;
    if (!expanded) return {false, error_exit};
    if (!result.run) return {false, result.exit_code == 0 ? 0 : error_exit};
    for (const SiteConfig& site : options.sites)
        if (std::string error = check_site(site); !error.empty())
            return {false, (usage_error(site.origin + ": " + error), error_exit)};
    for (const SiteConfig& site : options.sites)
        if (std::string error = check_root(site.root); !error.empty())
            return {false, (usage_error(site.origin + ": " + error), error_exit)};
    for (const SiteConfig& site : options.sites)
        for (const SiteLocation& location : site.locations) {
            std::string error = location.root.empty() ? "" : check_root(location.root);
            if (error.empty() && location.handler == "fastcgi" && !site.fastcgi &&
                options.fastcgi.empty())
                error = "handler = \"fastcgi\" but the site has no fastcgi";
            if (!error.empty())
                return {false, (usage_error(location.origin + ": location " + location.path + ": " +
                                            error),
                                error_exit)};
        }
    warn_about_sites(options);
    // The htpasswd files of the sites' auth rules: read now, so that a bad
    // one stops the start, `-t` and a reload (the running files stay).
    if (std::string error; !load_site_auth(options.sites, error))
        return {false, (usage_error(error), error_exit)};
    if (std::string error = check_tls(options); !error.empty())
        return {false, (usage_error(in_config_terms(error, origins)), error_exit)};
    if (check_only) {
        std::vector<std::string> errors = check_start_up(options);
        for (const std::string& error : errors)
            std::fprintf(stderr, "lepus: %s\n", in_config_terms(error, origins).c_str());
        if (!errors.empty()) return {false, error_exit};
        std::printf("ok\n");
        return {false, 0};
    }
    return result;
}

} // namespace lepus
