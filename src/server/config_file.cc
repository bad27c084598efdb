#include "server/config_file.h"

#include "base/units.h"
#include "log/access_log_format.h"
#include "server/detail/config_reader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <glob.h>
#include <toml++/toml.h>
#include <unistd.h>

namespace lepus {

std::string detail::config_position(const std::string& path, const toml::source_region& region) {
    return path + ":" + std::to_string(region.begin.line) + ":" +
           std::to_string(region.begin.column);
}

// Checks the node's type first: toml++'s value<T>() converts between types.
std::optional<std::string> detail::scalar_text(const toml::node& node) {
    if (node.is_string()) return *node.value<std::string>();
    if (node.is_integer()) return std::to_string(*node.value<int64_t>());
    if (node.is_floating_point()) return std::to_string(*node.value<double>());
    return std::nullopt;
}

namespace {

using detail::config_position;

// Parses `path` into `table`; false with one message when it cannot be read or parsed.
bool parse_toml(const std::string& path, toml::table& table, std::vector<std::string>& errors) {
    try {
        table = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        if (e.source().begin.line == 0) // the file itself could not be read
            errors.push_back(path + ": cannot read: " + std::string(e.description()));
        else
            errors.push_back(config_position(path, e.source()) + ": " +
                             std::string(e.description()));
        return false;
    }
    return true;
}

// toml++ keeps keys sorted by name; problems are reported in file order
// (errors[from...], each "PATH:LINE:COLUMN: what").
void sort_by_position(const std::string& path, std::vector<std::string>& errors, size_t from) {
    auto line_of = [&](const std::string& message) {
        size_t at = message.find(':', path.size());
        return std::atol(message.c_str() + at + 1) * 100000 +
               std::atol(message.c_str() + message.find(':', at + 1) + 1);
    };
    std::stable_sort(
        errors.begin() + long(from), errors.end(),
        [&](const std::string& a, const std::string& b) { return line_of(a) < line_of(b); });
}

using detail::ConfigReader;
using detail::scalar_text;

class Reader : public ConfigReader {
public:
    using ConfigReader::ConfigReader;

    // nginx writes `index index.php index.html;`: here that is one file name
    // with a space, which no request would ever find. False after an error.
    bool refuse_spaced_index(const toml::node& node, const std::vector<std::string>& files) {
        for (const std::string& file : files)
            if (file.find_first_of(" \t") != std::string::npos) {
                error(node, "'index' is a list of file names: write [\"" +
                                file.substr(0, file.find_first_of(" \t")) +
                                "\", ...], not one string with spaces");
                return false;
            }
        return true;
    }

    void top_level(const toml::table& table, ConfigFile& out) {
        for (auto&& [key, node] : table) {
            std::string name(key.str());
            if (name == "site") {
                sites(node, out);
                continue;
            }
            if (name == "include") {
                includes(node, out);
                continue;
            }
            if (name == "fastcgi_params") {
                // A table here, one --fastcgi-param NAME=VALUE each on the command line.
                std::vector<std::pair<std::string, std::string>> params;
                detail::read_fastcgi_params(*this, node, params);
                out.origins["--fastcgi-param"] = config_position(path_, node.source());
                for (auto& [param, value] : params) {
                    out.arguments.emplace_back("--fastcgi-param");
                    out.arguments.push_back(param);
                    out.arguments.back().append("=").append(value);
                }
                continue;
            }
            if (name == "config") {
                error(node, "'config' cannot name another file");
                continue;
            }
            if (name == "index")
                if (auto files = strings(node, name); files && !refuse_spaced_index(node, *files))
                    continue;
            std::string option = "--" + name;
            std::replace(option.begin() + 2, option.end(), '_', '-');
            out.origins[option] = config_position(path_, node.source());
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
            site.origin = config_position(path_, item.source());
            site_keys(*item.as_table(), site);
            if (site.root.empty()) error(item, "[[site]] needs a 'root'");
            out.sites.push_back(std::move(site));
        }
    }

    // `include = ["/etc/lepus/sites.d/*.toml"]`: each pattern's files, in the
    // sorted order of glob(3) (the conf.d habit), add their [[site]] blocks
    // after the ones of the files before. A relative pattern is relative to
    // this file's folder; a pattern that matches nothing is fine (an empty
    // sites.d), a plain path that does not exist is not. The included files'
    // errors, each in its own file's order, go to `included_errors_`.
    void includes(const toml::node& node, ConfigFile& out) {
        auto patterns = strings(node, "include");
        if (!patterns) return;
        std::string folder = path_.substr(0, path_.rfind('/') + 1);
        for (const std::string& pattern : *patterns) {
            std::string full = pattern.starts_with('/') ? pattern : folder + pattern;
            glob_t found{};
            int status = glob(full.c_str(), GLOB_ERR, nullptr, &found);
            std::vector<std::string> files(found.gl_pathv, found.gl_pathv + found.gl_pathc);
            globfree(&found);
            if (status == GLOB_NOMATCH && full.find_first_of("*?[") == std::string::npos)
                error(node, "include: '" + full + "' does not exist");
            else if (status != 0 && status != GLOB_NOMATCH)
                error(node, "include: cannot read the files of '" + full + "'");
            for (const std::string& file : files)
                include_file(file, out);
        }
    }

    void include_file(const std::string& file, ConfigFile& out) {
        std::vector<std::string> errors;
        toml::table table;
        if (!parse_toml(file, table, errors)) {
            included_errors_.insert(included_errors_.end(), errors.begin(), errors.end());
            return;
        }
        Reader reader(file, errors);
        for (auto&& [key, node] : table) {
            if (key.str() == "site")
                reader.sites(node, out);
            else
                reader.error(node, "'" + std::string(key.str()) +
                                       "' in an included file: it may hold only [[site]] blocks");
        }
        sort_by_position(file, errors, 0);
        included_errors_.insert(included_errors_.end(), errors.begin(), errors.end());
    }

    // After every file: the first site is the default when none says so.
    void choose_default_site(ConfigFile& out) {
        bool any_default = std::any_of(out.sites.begin(), out.sites.end(),
                                       [](const SiteConfig& s) { return s.is_default; });
        if (!any_default && !out.sites.empty()) out.sites.front().is_default = true;
        const SiteConfig* first = nullptr;
        for (const SiteConfig& site : out.sites) {
            if (!site.is_default) continue;
            if (first)
                errors_.push_back(site.origin + ": more than one [[site]] has default = true (" +
                                  first->origin + " too)");
            first = &site;
        }
    }

    std::vector<std::string> included_errors_;

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
                if (site.index) refuse_spaced_index(node, *site.index);
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
            } else if (name == "access_log_format") {
                std::string message;
                auto text = string(node, name);
                auto format = text ? AccessLogFormat::compile(*text, message) : std::nullopt;
                if (format)
                    site.access_log_format =
                        std::make_shared<const AccessLogFormat>(std::move(*format));
                else if (text)
                    error(node, message);
            } else if (name == "fastcgi") {
                detail::read_fastcgi(*this, node, site);
            } else if (name == "fastcgi_params") {
                detail::read_fastcgi_params(*this, node, site.fastcgi_params);
            } else if (name == "proxy") {
                detail::read_proxy(*this, node, site);
            } else if (name == "error_page") {
                detail::read_error_pages(*this, node, site);
            } else if (name == "headers") {
                detail::read_header_rules(*this, node, site);
            } else if (name == "redirects") {
                detail::read_redirects(*this, node, site);
            } else if (name == "tls") {
                detail::read_tls(*this, node, site);
            } else if (name == "access") {
                detail::read_access_rules(*this, node, site);
            } else if (name == "limits") {
                detail::read_limit_rules(*this, node, site);
            } else if (name == "conn_limit") {
                detail::read_conn_limit(*this, node, site);
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
                detail::read_auth_rules(*this, node, site);
            } else if (name == "locations") {
                detail::read_locations(*this, node, site);
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
        site.https_redirect_given = true;
        if (node.is_boolean()) { // value<bool>() would also take an integer
            site.https_redirect = *node.value<bool>() ? 443 : 0;
            return;
        }
        auto port = node.is_integer() ? node.value<int64_t>() : std::nullopt;
        if (!port || *port < 1 || *port > 65535)
            return error(node, "'https_redirect' is true, false or a port (1-65535)");
        site.https_redirect = uint16_t(*port);
    }
};
} // namespace

bool load_config_file(const std::string& path, ConfigFile& out, std::vector<std::string>& errors) {
    size_t errors_before = errors.size();
    toml::table table;
    if (!parse_toml(path, table, errors)) return false;
    Reader reader(path, errors);
    reader.top_level(table, out);
    sort_by_position(path, errors, errors_before);
    errors.insert(errors.end(), reader.included_errors_.begin(), reader.included_errors_.end());
    reader.choose_default_site(out);
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
