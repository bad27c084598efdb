#include "server/config_file.h"

#include "base/units.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <toml++/toml.h>
#include <unistd.h>

namespace lepus {
namespace {

std::string position(const std::string& path, const toml::source_region& region) {
    return path + ":" + std::to_string(region.begin.line) + ":" +
           std::to_string(region.begin.column);
}

// A scalar TOML value as command-line text; nullopt for tables and arrays.
// (Checks the node's type first: toml++'s value<T>() converts between types.)
std::optional<std::string> scalar_text(const toml::node& node) {
    if (node.is_string()) return *node.value<std::string>();
    if (node.is_integer()) return std::to_string(*node.value<int64_t>());
    if (node.is_floating_point()) return std::to_string(*node.value<double>());
    return std::nullopt;
}

class Reader {
public:
    Reader(const std::string& path, std::vector<std::string>& errors)
        : path_(path), errors_(errors) {}

    void error(const toml::node& node, const std::string& what) {
        errors_.push_back(position(path_, node.source()) + ": " + what);
    }

    std::optional<std::string> string(const toml::node& node, std::string_view key) {
        if (node.is_string()) return *node.value<std::string>();
        error(node, "'" + std::string(key) + "' must be a string");
        return std::nullopt;
    }

    std::optional<bool> boolean(const toml::node& node, std::string_view key) {
        if (node.is_boolean()) return *node.value<bool>();
        error(node, "'" + std::string(key) + "' must be true or false");
        return std::nullopt;
    }

    std::optional<unsigned> count(const toml::node& node, std::string_view key) {
        auto i = node.is_integer() ? node.value<int64_t>() : std::nullopt;
        if (i && *i > 0 && *i < (1 << 20)) return unsigned(*i);
        error(node, "'" + std::string(key) + "' must be a positive whole number");
        return std::nullopt;
    }

    std::optional<uint64_t> duration(const toml::node& node, std::string_view key) {
        auto text = scalar_text(node);
        if (text)
            if (auto ms = parse_duration_ms(*text); ms && *ms > 0) return ms;
        error(node, "'" + std::string(key) + "' must be a duration such as 30, 500ms, 10s, 2m");
        return std::nullopt;
    }

    std::optional<std::vector<std::string>> strings(const toml::node& node, std::string_view key) {
        std::vector<std::string> out;
        if (node.is_string()) {
            out.push_back(*node.value<std::string>());
            return out;
        }
        const toml::array* array = node.as_array();
        if (array) {
            for (const toml::node& item : *array) {
                if (!item.is_string()) break;
                out.push_back(*item.value<std::string>());
            }
            if (out.size() == array->size()) return out;
        }
        error(node, "'" + std::string(key) + "' must be a string or an array of strings");
        return std::nullopt;
    }

    void top_level(const toml::table& table, ConfigFile& out) {
        for (auto&& [key, node] : table) {
            std::string name(key.str());
            if (name == "site") {
                sites(node, out);
                continue;
            }
            if (name == "config") {
                error(node, "'config' cannot name another file");
                continue;
            }
            std::string option = "--" + name;
            std::replace(option.begin() + 2, option.end(), '_', '-');
            out.origins[option] = position(path_, node.source());
            if (node.is_boolean() &&
                (option == "--compress" || option == "--defer-accept" || option == "--http2" ||
                 option == "--h2c" || option == "--h2c-sendfile" || option == "--pin" ||
                 option == "--ktls" || option == "--notsent-lowat" ||
                 option == "--fastcgi-keepalive" || option == "--request-buffering")) {
                // Options that take on|off: `compress = false` means off (and
                // `notsent_lowat = true` is refused as not a size).
                out.arguments.push_back(option);
                out.arguments.emplace_back(*node.value<bool>() ? "on" : "off");
            } else if (node.is_boolean()) {
                // Flags: true means "given"; false leaves the default.
                if (*node.value<bool>()) out.arguments.push_back(option);
            } else if (auto text = scalar_text(node)) {
                out.arguments.push_back(option);
                out.arguments.push_back(*text);
            } else if (const toml::array* array = node.as_array()) {
                for (const toml::node& item : *array) {
                    auto text = scalar_text(item);
                    if (!text) {
                        error(item, "'" + name + "' must hold plain values");
                        continue;
                    }
                    out.arguments.push_back(option);
                    out.arguments.push_back(*text);
                }
            } else {
                error(node, "unknown section '" + name + "'");
            }
        }
    }

    void sites(const toml::node& node, ConfigFile& out) {
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables()) {
            error(node, "'site' must be written as [[site]] blocks");
            return;
        }
        for (const toml::node& item : *array) {
            SiteConfig site;
            site.origin = position(path_, item.source());
            site_keys(*item.as_table(), site);
            if (site.root.empty()) error(item, "[[site]] needs a 'root'");
            out.sites.push_back(std::move(site));
        }
        bool any_default = std::any_of(out.sites.begin(), out.sites.end(),
                                       [](const SiteConfig& s) { return s.is_default; });
        if (!any_default && !out.sites.empty()) out.sites.front().is_default = true;
        if (std::count_if(out.sites.begin(), out.sites.end(),
                          [](const SiteConfig& s) { return s.is_default; }) > 1)
            error(node, "more than one [[site]] has default = true");
    }

    void try_files(const toml::node& node, std::string_view name, SiteConfig& site) {
        std::optional<std::vector<std::string>> words;
        if (name == "spa") {
            auto on = boolean(node, name);
            if (!on || !*on) return;
            words = spa_try_files();
        } else {
            words = strings(node, name);
        }
        if (!words) return;
        if (site.try_files) {
            error(node, "'try_files' and 'spa' both say where unknown paths go: give one");
            return;
        }
        std::string message;
        site.try_files = parse_try_files(*words, message);
        if (!site.try_files) error(node, message);
    }

    void site_keys(const toml::table& table, SiteConfig& site) {
        for (auto&& [key, node] : table) {
            std::string_view name = key.str();
            if (name == "server_names") {
                if (auto names = strings(node, name)) server_names(node, *names, site);
            } else if (name == "default") {
                if (auto b = boolean(node, name)) site.is_default = *b;
            } else if (name == "root") {
                if (auto root = string(node, name)) site.root = *root;
            } else if (name == "index") {
                site.index = strings(node, name);
                // nginx writes `index index.php index.html;`: here that is one
                // file name with a space, which no request would ever find.
                for (const std::string& file : site.index.value_or(std::vector<std::string>{}))
                    if (file.find_first_of(" \t") != std::string::npos) {
                        error(node, "'index' is a list of file names: write [\"" +
                                        file.substr(0, file.find_first_of(" \t")) +
                                        "\", ...], not one string with spaces");
                        break;
                    }
            } else if (name == "autoindex") {
                site.autoindex = boolean(node, name);
            } else if (name == "dotfiles") {
                auto text = string(node, name);
                if (text && *text != "allow" && *text != "deny")
                    error(node, "'dotfiles' is allow or deny");
                else if (text)
                    site.dotfiles_allow = *text == "allow";
            } else if (name == "access_log") {
                site.access_log = string(node, name);
            } else if (name == "fastcgi") {
                fastcgi(node, site);
            } else if (name == "proxy") {
                proxy(node, site);
            } else if (name == "error_page") {
                error_pages(node, site);
            } else if (name == "headers") {
                header_rules(node, site);
            } else if (name == "redirects") {
                redirects(node, site);
            } else if (name == "tls") {
                tls(node, site);
            } else if (name == "https_redirect") {
                https_redirect(node, site);
            } else if (name == "symlinks") {
                auto text = string(node, name);
                if (text && *text != "beneath" && *text != "follow" && *text != "owner")
                    error(node, "'symlinks' is beneath, follow or owner");
                else if (text)
                    site.symlinks = *text;
            } else if (name == "compress") {
                site.compress = boolean(node, name);
            } else if (name == "request_buffering") {
                site.request_buffering = boolean(node, name);
            } else if (name == "try_files" || name == "spa") {
                try_files(node, name, site);
            } else if (name == "x_accel") {
                std::string message;
                if (auto text = string(node, name);
                    text && !(site.x_accel = parse_x_accel(*text, message)))
                    error(node, message);
            } else if (name == "auth") {
                auth_rules(node, site);
            } else {
                error(node, "unknown key '" + std::string(name) + "' in [[site]]");
            }
        }
    }

    // Issue 33: nginx's forms that lepus would take literally and never match
    // (or, for a port, match on every port and miss at SNI) are refused.
    void server_names(const toml::node& node, const std::vector<std::string>& names,
                      SiteConfig& site) {
        for (const std::string& host : names) {
            if (host.starts_with(".")) {
                std::string message = "server name '";
                message.append(host).append("': nginx's leading dot is not lepus's; write \"");
                message.append(host, 1).append("\", \"*").append(host).append("\"");
                return error(node, message);
            }
            if (host.starts_with("~"))
                return error(node, "server name '" + host +
                                       "': regular expressions are not supported; list the "
                                       "names, or use \"*.domain\"");
            if (host.find(':') != std::string::npos && !host.starts_with("["))
                return error(node, "server name '" + host +
                                       "': a name has no port (the site answers on every "
                                       "listener); write \"" +
                                       host.substr(0, host.find(':')) + "\"");
            if (host.find('*') != std::string::npos &&
                !(host.starts_with("*.") && host.find('*', 1) == std::string::npos))
                return error(node, "server name '" + host +
                                       "': '*' is only allowed as the first label (\"*.domain\")");
        }
        site.server_names = names;
    }

    // `https_redirect = true` (port 443) or a port number (the TLS listener's).
    void https_redirect(const toml::node& node, SiteConfig& site) {
        if (node.is_boolean()) { // value<bool>() would also take an integer
            site.https_redirect = *node.value<bool>() ? 443 : 0;
            return;
        }
        auto port = node.is_integer() ? node.value<int64_t>() : std::nullopt;
        if (!port || *port < 1 || *port > 65535)
            return error(node, "'https_redirect' is true, false or a port (1-65535)");
        site.https_redirect = uint16_t(*port);
    }

    void fastcgi(const toml::node& node, SiteConfig& site) {
        SiteFastCgi fastcgi;
        if (node.is_string()) {
            fastcgi.address = *node.value<std::string>();
            site.fastcgi = fastcgi;
            return;
        }
        const toml::table* table = node.as_table();
        if (!table) return error(node, "'fastcgi' is an address or a table");
        for (auto&& [key, value] : *table) {
            std::string_view name = key.str();
            if (name == "address") {
                if (auto a = string(value, name)) fastcgi.address = *a;
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
        if (fastcgi.address.empty()) error(node, "fastcgi needs an 'address'");
        site.fastcgi = fastcgi;
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
        for (const std::string& path : proxy.paths)
            if (!path.starts_with('/')) error(node, "proxy paths start with /");
        site.proxy = proxy;
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

    void header_rules(const toml::node& node, SiteConfig& site) {
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
    void auth_rules(const toml::node& node, SiteConfig& site) {
        const toml::array* array = node.as_array();
        if (node.is_table()) return auth_rule(*node.as_table(), site);
        if (!array || !array->is_array_of_tables())
            return error(node, "'auth' is a list of {paths, realm, htpasswd} tables");
        for (const toml::node& item : *array)
            auth_rule(*item.as_table(), site);
    }

    void auth_rule(const toml::table& table, SiteConfig& site) {
        AuthRule rule;
        rule.origin = position(path_, table.source());
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
        for (const toml::node& item : *array) {
            Redirect redirect;
            for (auto&& [key, value] : *item.as_table()) {
                std::string_view name = key.str();
                if (name == "from" || name == "to") {
                    auto text = string(value, name);
                    if (text) (name == "from" ? redirect.from : redirect.to) = *text;
                } else if (name == "status") {
                    auto status = value.is_integer() ? value.value<int64_t>() : std::nullopt;
                    if (!status ||
                        (*status != 301 && *status != 302 && *status != 307 && *status != 308))
                        error(value, "redirect status is 301, 302, 307 or 308");
                    else
                        redirect.status = int(*status);
                } else {
                    error(value, "unknown key '" + std::string(name) + "' in redirects");
                }
            }
            if (!redirect.from.starts_with("/") || redirect.to.empty() ||
                redirect.to.find_first_of("\r\n") != std::string::npos)
                error(item, "a redirect needs from (a path) and to");
            else
                site.redirects.push_back(redirect);
        }
    }

    // tls = { cert, key }, or [{ cert, key }, ...] for an RSA and an ECDSA pair.
    void tls(const toml::node& node, SiteConfig& site) {
        auto pair = [&](const toml::table& table, const toml::node& where) {
            SiteTls tls;
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

private:
    const std::string& path_;
    std::vector<std::string>& errors_;
};

} // namespace

bool load_config_file(const std::string& path, ConfigFile& out, std::vector<std::string>& errors) {
    size_t errors_before = errors.size();
    toml::table table;
    try {
        table = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        if (e.source().begin.line == 0) // the file itself could not be read
            errors.push_back(path + ": cannot read: " + std::string(e.description()));
        else
            errors.push_back(position(path, e.source()) + ": " + std::string(e.description()));
        return false;
    }
    Reader reader(path, errors);
    reader.top_level(table, out);
    // toml++ keeps keys sorted by name; report problems in file order.
    auto line_of = [&](const std::string& message) {
        size_t at = message.find(':', path.size());
        return std::atol(message.c_str() + at + 1) * 100000 +
               std::atol(message.c_str() + message.find(':', at + 1) + 1);
    };
    std::stable_sort(
        errors.begin() + long(errors_before), errors.end(),
        [&](const std::string& a, const std::string& b) { return line_of(a) < line_of(b); });
    return errors.size() == errors_before;
}

bool expand_config_argument(int argc, char** argv, std::vector<std::string>& expanded,
                            std::vector<SiteConfig>& sites,
                            std::map<std::string, std::string>& origins, bool& check_only,
                            std::string& config_path, std::vector<std::string>& errors) {
    std::vector<std::string> command_line;
    check_only = false;
    config_path.clear();
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "-t" || arg == "--test-config") {
            check_only = true;
        } else if ((arg == "--config" || arg == "-c") && i + 1 < argc) {
            config_path = argv[++i];
        } else if (arg.starts_with("--config=")) {
            config_path = std::string(arg.substr(9));
        } else {
            command_line.emplace_back(arg);
        }
    }
    expanded.assign(1, argc > 0 ? argv[0] : "lepus");
    // Issue 33: `lepus -t` alone checks the installed config, as `nginx -t`
    // does; LEPUS_DEFAULT_CONFIG moves it (the tests never read the host's /etc).
    if (config_path.empty() && check_only) {
        const char* moved = std::getenv("LEPUS_DEFAULT_CONFIG");
        std::string fallback = moved && *moved ? moved : kDefaultConfigPath;
        if (access(fallback.c_str(), F_OK) == 0)
            config_path = fallback;
        else
            errors.push_back("-t needs --config FILE (the default " + fallback +
                             " does not exist)");
    }
    if (config_path.empty()) {
        expanded.insert(expanded.end(), command_line.begin(), command_line.end());
        return errors.empty();
    }
    ConfigFile file;
    // On errors the arguments read so far are still expanded, so the caller can
    // report problems in them as well.
    bool loaded = load_config_file(config_path, file, errors);
    // The command line first, then the file's options that it does not set
    // (a list on the command line replaces the file's list). In this order a
    // multi-value option from the file cannot swallow the positional root.
    auto on_command_line = [&](const std::string& option) {
        std::string alias = option == "--listen" ? "-l" : option;
        return std::any_of(command_line.begin(), command_line.end(), [&](const std::string& arg) {
            return arg == option || arg == alias || arg.starts_with(option + "=");
        });
    };
    expanded.insert(expanded.end(), command_line.begin(), command_line.end());
    for (size_t i = 0; i < file.arguments.size(); ++i) {
        const std::string& option = file.arguments[i];
        // No value may start with "--" (options.cc), so this tells a flag
        // (written alone) from an option followed by its value.
        bool has_value = i + 1 < file.arguments.size() && !file.arguments[i + 1].starts_with("--");
        if (on_command_line(option)) {
            i += has_value;
            continue;
        }
        expanded.push_back(option);
        if (has_value) expanded.push_back(file.arguments[++i]);
    }
    sites = std::move(file.sites);
    origins = std::move(file.origins);
    return loaded;
}

} // namespace lepus
