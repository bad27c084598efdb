// The [[site]] keys whose values are tables: fastcgi, proxy, error_page,
// headers, auth, redirects, tls (detail/config_reader.h).
#include "fastcgi/cgi_params.h"
#include "server/detail/config_reader.h"
#include "server/path_pattern.h"

#include <algorithm>
#include <cstdlib>

namespace lepus::detail {
namespace {

// The readers share the file's path and error list with the reader of the
// whole file (ConfigReader holds references to both).
class SiteTables : public ConfigReader {
public:
    explicit SiteTables(const ConfigReader& reader) : ConfigReader(reader) {}

private:
    bool hash_key_set_ = false;

public:
    void fastcgi(const toml::node& node, SiteConfig& site) {
        SiteFastCgi fastcgi;
        if (node.is_string()) {
            fastcgi.addresses = {*node.value<std::string>()};
            site.fastcgi = fastcgi;
            return;
        }
        const toml::table* table = node.as_table();
        if (!table) return error(node, "'fastcgi' is an address or a table");
        for (auto&& [key, value] : *table) {
            std::string_view name = key.str();
            if (name == "address") {
                if (auto a = strings(value, name)) fastcgi.addresses = *a;
            } else if (balancing_key(name, value, fastcgi.balancing)) {
            } else if (name == "ext") {
                if (auto e = strings(value, name)) fastcgi.ext = *e;
            } else if (name == "pool") {
                fastcgi.pool = count(value, name);
            } else if (name == "queue") {
                fastcgi.queue = count(value, name);
            } else if (name == "timeout") {
                fastcgi.timeout_ms = duration(value, name);
            } else if (name == "keepalive") {
                fastcgi.keepalive = boolean(value, name);
            } else {
                error(value, "unknown key '" + std::string(name) + "' in fastcgi");
            }
        }
        if (fastcgi.addresses.empty()) error(node, "fastcgi needs an 'address'");
        check_balancing(node, "fastcgi", fastcgi.addresses.size(), fastcgi.balancing);
        site.fastcgi = fastcgi;
    }

    void fastcgi_params(const toml::node& node,
                        std::vector<std::pair<std::string, std::string>>& params) {
        const toml::table* table = node.as_table();
        if (!table)
            return error(node, R"('fastcgi_params' is a table: { SERVER_SOFTWARE = "nginx" })");
        for (auto&& [key, value] : *table) {
            std::string name(key.str());
            if (std::string message = fastcgi::cgi_param_name_error(name); !message.empty()) {
                error(value, message);
                continue;
            }
            // Strings, and numbers written as text (a port, a flag as 1).
            auto text = value.is_boolean() ? std::nullopt : scalar_text(value);
            if (!text)
                error(value, "fastcgi_params." + name + " must be a string");
            else
                params.emplace_back(name, *text);
        }
    }

    // `proxy = "ADDRESS"` or a table (config_file.h: SiteProxy).
    void proxy(const toml::node& node, SiteConfig& site) {
        SiteProxy proxy;
        if (node.is_string()) {
            proxy.addresses = {*node.value<std::string>()};
            site.proxy = proxy;
            return;
        }
        const toml::table* table = node.as_table();
        if (!table) return error(node, "'proxy' is an address or a table");
        for (auto&& [key, value] : *table) {
            std::string_view name = key.str();
            if (name == "address" && value.is_string()) {
                proxy.addresses = {*value.value<std::string>()};
            } else if (name == "address") {
                if (auto a = strings(value, name)) proxy.addresses = *a;
            } else if (balancing_key(name, value, proxy.balancing)) {
            } else if (name == "paths") {
                if (auto p = strings(value, name)) proxy.paths = *p;
            } else if (name == "host") {
                if (auto h = string(value, name)) proxy.host = *h;
            } else if (name == "pool") {
                proxy.pool = count(value, name);
            } else if (name == "queue") {
                proxy.queue = count(value, name);
            } else if (name == "timeout") {
                proxy.timeout_ms = duration(value, name);
            } else {
                error(value, "unknown key '" + std::string(name) + "' in proxy");
            }
        }
        if (proxy.addresses.empty()) error(node, "proxy needs an 'address'");
        check_balancing(node, "proxy", proxy.addresses.size(), proxy.balancing);
        for (const std::string& path : proxy.paths)
            if (!path.starts_with('/')) error(node, "proxy paths start with /");
        site.proxy = proxy;
    }

    // A string key whose value `parse` turns into `out`; else one error naming `choices`.
    template <class Parse, class Value>
    void parsed(const toml::node& value, std::string_view name, Parse parse, Value& out,
                const char* choices) {
        auto text = string(value, name);
        if (!text) return;
        if (auto result = parse(*text))
            out = *result;
        else
            error(value, "'" + std::string(name) + "' is " + choices);
    }

    // `balance`, `hash_key`, `weights`, `max_fails`, `fail_timeout` and `slow_start`, which
    // fastcgi and proxy share;
    // false for any other key.
    bool balancing_key(std::string_view name, const toml::node& value,
                       upstream::Balancing& balancing) {
        if (name == "balance") {
            parsed(value, name, upstream::parse_balance, balancing.balance,
                   R"("round_robin", "least_conn" or "hash")");
        } else if (name == "hash_key") {
            parsed(value, name, upstream::parse_hash_key, balancing.key,
                   R"("client", "header:NAME" or "cookie:NAME")");
            hash_key_set_ = true;
        } else if (name == "health") {
            health(value, balancing);
        } else if (name == "max_fails") {
            if (auto fails = count(value, name)) balancing.max_fails = *fails;
        } else if (name == "fail_timeout") {
            if (auto ms = duration(value, name)) balancing.fail_timeout_ms = *ms;
        } else if (name == "slow_start") {
            // "0s" (or 0): a backend back in gets its whole weight at once.
            auto text = scalar_text(value);
            auto ms = text ? parse_duration_ms(*text) : std::nullopt;
            if (ms)
                balancing.slow_start_ms = *ms;
            else
                error(value, "'slow_start' must be a duration such as 10s, 30s or 0s");
        } else if (name == "weights") {
            const toml::array* array = value.as_array();
            balancing.weights.clear();
            for (size_t i = 0; array && i < array->size(); ++i)
                if (auto weight = count(*array->get(i), name)) balancing.weights.push_back(*weight);
            if (!array) error(value, "'weights' must be an array of positive whole numbers");
        } else {
            return false;
        }
        return true;
    }

    // `health = { path = "/health", interval = "2s", fails = 2, passes = 2 }`.
    void health(const toml::node& node, upstream::Balancing& balancing) {
        const toml::table* table = node.as_table();
        if (!table) return error(node, "'health' is a table such as { path = \"/health\" }");
        balancing.health_interval_ms = 5000;
        for (auto&& [key, value] : *table) {
            std::string_view name = key.str();
            if (name == "path") {
                if (auto path = string(value, name)) balancing.health_path = *path;
            } else if (name == "interval") {
                if (auto ms = duration(value, name)) balancing.health_interval_ms = *ms;
            } else if (name == "fails") {
                if (auto fails = count(value, name)) balancing.health_fails = *fails;
            } else if (name == "passes") {
                if (auto passes = count(value, name)) balancing.health_passes = *passes;
            } else {
                error(value, "unknown key '" + std::string(name) + "' in health");
            }
        }
        if (!balancing.health_path.starts_with('/'))
            error(node, "health needs a 'path' starting with /");
    }

    void check_balancing(const toml::node& node, const std::string& table, size_t addresses,
                         const upstream::Balancing& balancing) {
        if (!balancing.weights.empty() && balancing.weights.size() != addresses)
            error(node, table + ": 'weights' needs one weight per address");
        if (hash_key_set_ && balancing.balance != upstream::Balance::Hash)
            error(node, table + ": 'hash_key' goes with balance = \"hash\"");
        hash_key_set_ = false;
    }

    void error_pages(const toml::node& node, SiteConfig& site) {
        const toml::table* table = node.as_table();
        if (!table)
            return error(node, "'error_page' is a table such as error_page.404 = \"/404.html\"");
        for (auto&& [key, value] : *table) {
            std::string code(key.str());
            int status = std::atoi(code.c_str());
            if (code.size() != 3 || status < 400 || status > 599)
                error(value, "error_page." + code + ": not a 4xx or 5xx status");
            else if (auto page = string(value, "error_page." + code);
                     page && !page->starts_with("/"))
                error(value, "error_page." + code + " must be a path starting with /");
            else if (page)
                site.error_pages[status] = *page;
        }
    }

    // In a location (`in_location`), a rule without `match` is for all of it.
    void header_rules(const toml::node& node, SiteConfig& site, bool in_location) {
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables())
            return error(node, "'headers' is a list of {match, name, value} tables");
        for (const toml::node& item : *array) {
            HeaderRule rule;
            for (auto&& [key, value] : *item.as_table()) {
                std::string_view name = key.str();
                auto text = string(value, name);
                if (!text) continue;
                if (name == "match")
                    rule.match = *text;
                else if (name == "name")
                    rule.name = *text;
                else if (name == "value")
                    rule.value = *text;
                else
                    error(value, "unknown key '" + std::string(name) + "' in headers");
            }
            if (in_location && rule.match.empty()) rule.match = "*";
            bool bad_name =
                rule.name.empty() || rule.name.find_first_of(" :\r\n\t") != std::string::npos;
            if (rule.match.empty() || bad_name ||
                rule.value.find_first_of("\r\n") != std::string::npos)
                error(item, "a header rule needs match, a valid name and a one-line value");
            else
                site.headers.push_back(rule);
        }
    }

    // auth = { ... } or [{ paths, realm, htpasswd }, { paths, off = true }, ...].
    // In a location (`in_location`), a rule without `paths` is for all of it.
    void auth_rules(const toml::node& node, SiteConfig& site, bool in_location) {
        const toml::array* array = node.as_array();
        if (node.is_table()) return auth_rule(*node.as_table(), site, in_location);
        if (!array || !array->is_array_of_tables())
            return error(node, "'auth' is a list of {paths, realm, htpasswd} tables");
        for (const toml::node& item : *array)
            auth_rule(*item.as_table(), site, in_location);
    }

    void auth_rule(const toml::table& table, SiteConfig& site, bool in_location) {
        AuthRule rule;
        if (in_location && !table.contains("paths")) rule.paths = {"/"};
        rule.origin = config_position(path_, table.source());
        for (auto&& [key, value] : table) {
            std::string_view name = key.str();
            if (name == "paths") {
                if (auto paths = strings(value, name)) rule.paths = *paths;
            } else if (name == "realm") {
                // RFC 7235 §2.2: a quoted-string; lepus writes it without escapes.
                auto realm = string(value, name);
                if (realm &&
                    (realm->empty() || std::any_of(realm->begin(), realm->end(), [](char c) {
                         return c == '"' || c == '\\' || (unsigned char)c < 0x20 || c == 0x7f;
                     })))
                    error(value, "'realm' must be one line of text without '\"' or '\\'");
                else if (realm)
                    rule.realm = *realm;
            } else if (name == "htpasswd") {
                if (auto file = string(value, name)) rule.htpasswd = *file;
            } else if (name == "off") {
                if (auto off = boolean(value, name)) rule.off = *off;
            } else if (name == "case_insensitive") {
                if (auto any_case = boolean(value, name)) rule.case_insensitive = *any_case;
            } else {
                error(value, "unknown key '" + std::string(name) + "' in auth");
            }
        }
        bool paths_ok = !rule.paths.empty() &&
                        std::all_of(rule.paths.begin(), rule.paths.end(),
                                    [](const std::string& p) { return p.starts_with('/'); });
        if (!paths_ok)
            error(table, "an auth rule needs paths, each starting with /");
        else if (rule.off == !rule.htpasswd.empty())
            error(table, "an auth rule needs either htpasswd (a password file) or off = true");
        else
            site.auth.push_back(std::move(rule));
    }

    void redirects(const toml::node& node, SiteConfig& site) {
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables())
            return error(node, "'redirects' is a list of {from, to, status} tables");
        for (const toml::node& item : *array)
            redirect(item, site);
    }

    void redirect(const toml::node& item, SiteConfig& site) {
        Redirect redirect;
        bool has_status = false;
        for (auto&& [key, value] : *item.as_table()) {
            std::string_view name = key.str();
            if (name == "from" || name == "to" || name == "pattern") {
                auto text = string(value, name);
                if (text)
                    (name == "from" ? redirect.from
                     : name == "to" ? redirect.to
                                    : redirect.pattern) = *text;
            } else if (name == "prefix" || name == "rewrite") {
                if (auto on = boolean(value, name))
                    (name == "prefix" ? redirect.prefix : redirect.rewrite) = *on;
            } else if (name == "status") {
                auto status = value.is_integer() ? value.value<int64_t>() : std::nullopt;
                has_status = true;
                if (!status ||
                    (*status != 301 && *status != 302 && *status != 307 && *status != 308))
                    error(value, "redirect status is 301, 302, 307 or 308");
                else
                    redirect.status = int(*status);
            } else {
                error(value, "unknown key '" + std::string(name) + "' in redirects");
            }
        }
        if (redirect.from.empty() == redirect.pattern.empty())
            return error(item, "a redirect needs from (a path) or pattern, not both");
        if (!redirect.pattern.empty() && redirect.prefix)
            return error(item, "prefix = true goes with from, not with pattern");
        if ((!redirect.from.empty() && !redirect.from.starts_with("/")) || redirect.to.empty() ||
            redirect.to.find_first_of("\r\n") != std::string::npos)
            return error(item, "a redirect needs from (a path) and to");
        if (redirect.rewrite && (!redirect.to.starts_with("/") || has_status))
            return error(item, "a rewrite goes to a path of the site (to = \"/...\") and has no "
                               "status");
        if (!redirect.pattern.empty()) {
            std::string message;
            auto pattern = PathPattern::compile(redirect.pattern, message);
            if (pattern) message = substitution_error(redirect.to, pattern->capture_count());
            if (!message.empty()) return error(item, message);
            redirect.compiled = std::make_shared<const PathPattern>(std::move(*pattern));
        }
        site.redirects.push_back(std::move(redirect));
    }

    // tls = { cert, key }, or [{ cert, key }, ...] for an RSA and an ECDSA pair.
    // Or tls = "acme": certificates from the ACME CA for the server_names (issue 34).
    void tls(const toml::node& node, SiteConfig& site) {
        if (auto text = node.value<std::string>()) {
            if (*text == "acme")
                site.tls_acme = true;
            else
                error(node, R"('tls' is "acme" or a table { cert = "...", key = "..." })");
            return;
        }
        auto pair = [&](const toml::table& table, const toml::node& where) {
            SiteTls tls;
            tls.origin = config_position(path(), where.source());
            for (auto&& [key, value] : table) {
                std::string_view name = key.str();
                if (name != "cert" && name != "key") {
                    error(value, "unknown key '" + std::string(name) + "' in tls");
                } else if (auto text = string(value, name)) {
                    (name == "cert" ? tls.cert : tls.key) = *text;
                }
            }
            if (tls.cert.empty() || tls.key.empty())
                error(where, "tls needs both 'cert' and 'key'");
            else
                site.tls.push_back(tls);
        };
        if (const toml::table* table = node.as_table()) return pair(*table, node);
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables())
            return error(node,
                         R"('tls' is a table { cert = "...", key = "..." } or a list of them)");
        for (const toml::node& item : *array)
            pair(*item.as_table(), item);
    }
};

} // namespace

void read_fastcgi(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    SiteTables(reader).fastcgi(node, site);
}

void read_fastcgi_params(ConfigReader& reader, const toml::node& node,
                         std::vector<std::pair<std::string, std::string>>& params) {
    SiteTables(reader).fastcgi_params(node, params);
}

void read_proxy(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    SiteTables(reader).proxy(node, site);
}

void read_error_pages(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    SiteTables(reader).error_pages(node, site);
}

void read_header_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site,
                       bool in_location) {
    SiteTables(reader).header_rules(node, site, in_location);
}

void read_auth_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site,
                     bool in_location) {
    SiteTables(reader).auth_rules(node, site, in_location);
}

void read_redirects(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    SiteTables(reader).redirects(node, site);
}

void read_tls(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    SiteTables(reader).tls(node, site);
}

} // namespace lepus::detail
