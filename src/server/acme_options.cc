#include "server/acme_options.h"

#include "acme/storage.h"
#include "base/units.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"
#include "server/detail/option_groups.h"

#include <charconv>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus {
namespace {

// A DNS name an ACME CA can validate by HTTP-01 or TLS-ALPN-01: letters,
// digits, '-' and dots, at least two labels, no wildcard (wildcards need
// DNS-01, RFC 8555 §7.1.3), no IP address.
std::string check_domain(const std::string& name) {
    bool valid = !name.empty() && name.size() <= 253 && name.front() != '.' && name.back() != '.' &&
                 name.find('.') != std::string::npos && name.find("..") == std::string::npos;
    bool letter = false;
    for (char c : name) {
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
        letter = letter || alpha;
        if (!alpha && !(c >= '0' && c <= '9') && c != '.') valid = false;
    }
    if (valid && letter) return {};
    return "'" + name + "' is not a domain name an ACME CA can validate (no wildcards, no IPs)";
}

bool readable(const std::string& path) {
    return ::access(path.c_str(), R_OK) == 0;
}

// The state folder must be one this process can write, or be makeable in the
// nearest folder above it that exists (-t says so before the start does).
std::string check_state_dir(const std::string& path) {
    std::string existing = path;
    struct stat st {};
    while (::stat(existing.c_str(), &st) != 0) {
        size_t slash = existing.find_last_of('/');
        if (slash == std::string::npos) {
            existing = ".";
            break;
        }
        existing = slash == 0 ? "/" : existing.substr(0, slash);
    }
    if (::stat(existing.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return "--state-dir '" + path + "': '" + existing + "' is not a folder";
    if (::access(existing.c_str(), W_OK | X_OK) != 0)
        return "--state-dir '" + path + "': '" + existing + "' is not writable by uid " +
               std::to_string(::geteuid());
    return {};
}

} // namespace

namespace detail {

void add_acme_options(CLI::App& app, ServerOptions& options) {
    app.option_defaults()->group("Automatic HTTPS (ACME)");
    app.add_option("--domain", options.domains,
                   "Get a certificate for this name from the ACME CA and serve it (repeatable)")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--acme-ca", options.acme_ca,
                   "ACME directory URL; letsencrypt (the default) or staging for Let's Encrypt's")
        ->capture_default_str();
    app.add_option("--acme-email", options.acme_email, "Contact address of the ACME account");
    app.add_option("--acme-ca-root", options.acme_ca_root,
                   "Trust this PEM root for the ACME CA's HTTPS (a private or test CA)");
    app.add_option("--acme-on-demand-ask", options.acme_on_demand_ask,
                   "Order certificates for names TLS clients ask for, when this URL answers "
                   "200 to ?domain=NAME (at most 10 new names an hour)");
    app.add_option("--acme-retry", options.acme_retry,
                   "Wait before retrying a failed order, doubled each time up to 12h")
        ->capture_default_str();
    app.add_option("--state-dir", options.state_dir,
                   "Where ACME account keys and certificates are kept (0700)")
        ->capture_default_str();
}

} // namespace detail

bool uses_acme(const ServerOptions& options) {
    if (!options.domains.empty() || !options.acme_on_demand_ask.empty()) return true;
    for (const SiteConfig& site : options.sites)
        if (site.tls_acme) return true;
    return false;
}

std::string finish_acme_options(ServerOptions& options) {
    if (options.acme_ca == "letsencrypt") options.acme_ca = acme::kLetsEncryptDirectory;
    if (options.acme_ca == "staging") options.acme_ca = acme::kLetsEncryptStagingDirectory;
    if (!uses_acme(options)) return {};
    if (!options.acme_ca.starts_with("https://") && !options.acme_ca.starts_with("http://"))
        return "--acme-ca '" + options.acme_ca + "' is not a URL, letsencrypt or staging";
    auto retry = parse_duration_ms(options.acme_retry);
    if (!retry || *retry == 0) return "--acme-retry '" + options.acme_retry + "' is not a duration";
    options.acme_retry_ms = *retry;
    if (options.state_dir.empty()) return "--state-dir must not be empty";
    if (std::string error = check_state_dir(options.state_dir); !error.empty()) return error;
    if (!options.acme_ca_root.empty() && !readable(options.acme_ca_root))
        return "cannot read --acme-ca-root '" + options.acme_ca_root + "'";
    for (const std::string& name : options.domains)
        if (std::string error = check_domain(name); !error.empty()) return "--domain: " + error;
    const std::string& ask = options.acme_on_demand_ask;
    if (!ask.empty() && !ask.starts_with("http://") && !ask.starts_with("https://"))
        return "--acme-on-demand-ask '" + ask + "' is not an http:// or https:// URL";
    for (const SiteConfig& site : options.sites) {
        if (!site.tls_acme) continue;
        if (site.server_names.empty()) return site.origin + R"(: tls = "acme" needs server_names)";
        for (const std::string& name : site.server_names)
            if (std::string error = check_domain(name); !error.empty())
                return site.origin + ": " + error;
    }
    // An ACME site is an HTTPS site: its plain-HTTP requests get 301 to the
    // TLS listener (as Caddy's), unless it says https_redirect = false. The
    // HTTP-01 challenge step runs before the redirects, so the CA still
    // reaches /.well-known/acme-challenge/ over plain HTTP.
    uint16_t tls_port = acme_redirect_port(options);
    for (SiteConfig& site : options.sites)
        if (site.tls_acme && !site.https_redirect_given) site.https_redirect = tls_port;
    return {};
}

std::vector<std::vector<std::string>> acme_certificate_names(const ServerOptions& options) {
    std::vector<std::vector<std::string>> names;
    if (!options.domains.empty()) names.push_back(options.domains);
    for (const SiteConfig& site : options.sites)
        if (site.tls_acme && !site.server_names.empty()) names.push_back(site.server_names);
    return names;
}

void add_acme_certificates(const ServerOptions& options, TlsSettings& settings) {
    for (const auto& names : acme_certificate_names(options)) {
        acme::CertificatePaths paths = acme::certificate_paths(options.state_dir, names);
        TlsSite site{names, {}};
        // Stored by an earlier run (or another instance): served at once.
        if (readable(paths.chain) && readable(paths.key))
            site.certificates.push_back({paths.chain, paths.key});
        if (settings.default_certificates.empty() && !site.certificates.empty())
            settings.default_certificates = site.certificates;
        settings.sites.insert(settings.sites.begin(), std::move(site));
    }
    if (options.acme_on_demand_ask.empty()) return;
    // Names ordered on demand earlier; any other name is asked about.
    settings.on_demand = true;
    for (const std::string& name : acme::on_demand_names(options.state_dir)) {
        acme::CertificatePaths paths = acme::certificate_paths(options.state_dir, {name});
        if (readable(paths.chain) && readable(paths.key))
            settings.sites.push_back({{name}, {{paths.chain, paths.key}}});
    }
}

uint16_t acme_redirect_port(const ServerOptions& options) {
    for (const std::string& text : options.listen) {
        ListenScheme scheme = split_listen_scheme(text);
        if (!scheme.tls || scheme.address.starts_with("unix:")) continue;
        std::string_view port = scheme.address.substr(scheme.address.rfind(':') + 1);
        unsigned value = 0;
        auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (error == std::errc() && end == port.data() + port.size() && value > 0 && value < 65536)
            return uint16_t(value);
    }
    return 0;
}

acme::AcmeOptions acme_options(const ServerOptions& options) {
    acme::AcmeOptions acme;
    acme.directory_url = options.acme_ca;
    acme.email = options.acme_email;
    acme.ca_root = options.acme_ca_root;
    acme.state_dir = options.state_dir;
    acme.retry_base = std::chrono::milliseconds(options.acme_retry_ms);
    acme.on_demand_ask = options.acme_on_demand_ask;
    acme.certificates = acme_certificate_names(options);
    bool plain = false, tls = false;
    for (const std::string& text : options.listen) {
        ListenScheme scheme = split_listen_scheme(text);
        // No CA reaches a Unix socket; HTTP-01 comes as HTTP/1.1, which h2c:// refuses.
        if (scheme.address.starts_with("unix:") || scheme.h2c) continue;
        (scheme.tls ? tls : plain) = true;
    }
    if (plain) acme.challenge_types.push_back(acme::ChallengeType::Http01);
    if (tls) acme.challenge_types.push_back(acme::ChallengeType::TlsAlpn01);
    return acme;
}

} // namespace lepus
