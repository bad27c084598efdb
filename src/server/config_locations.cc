// The [[site]] key `locations` (config_file.h: SiteLocation). A location's
// own headers, auth, access, limits, conn_limit, try_files and proxy are read by the readers of
// the site's keys of the same names, into the location's own SiteConfig.
#include "server/detail/config_reader.h"
#include "server/proxy_options.h"

#include <algorithm>

namespace lepus::detail {
namespace {

class LocationReader : public ConfigReader {
public:
    explicit LocationReader(const ConfigReader& reader) : ConfigReader(reader) {}

    void locations(const toml::node& node, SiteConfig& site) {
        const toml::array* array = node.as_array();
        if (!array || !array->is_array_of_tables())
            return error(node, "'locations' is a list of {path, root} tables");
        for (const toml::node& item : *array)
            location(*item.as_table(), site);
    }

private:
    void read_try_files(const toml::node& value, SiteConfig& own) {
        auto words = strings(value, "try_files");
        if (!words) return;
        std::string message;
        own.try_files = parse_try_files(*words, message);
        if (!own.try_files) error(value, message);
    }

    // The site's proxy table, but for the location's path only: no `paths`.
    void read_location_proxy(const toml::node& value, SiteConfig& own) {
        read_proxy(*this, value, own);
        if (!own.proxy) return;
        if (!own.proxy->paths.empty())
            error(value, "a location's proxy has no paths: the location's path is its path");
        if (std::string message = check_site_proxy(*own.proxy); !message.empty())
            error(value, message);
    }

    void location(const toml::table& table, SiteConfig& site) {
        SiteLocation location;
        location.origin = config_position(path_, table.source());
        location.own = std::make_shared<SiteConfig>();
        SiteConfig& own = *location.own;
        const toml::node* proxy = nullptr;
        const toml::node* try_files = nullptr;
        for (auto&& [key, value] : table) {
            std::string_view name = key.str();
            if (name == "path" || name == "root" || name == "handler") {
                auto text = string(value, name);
                if (!text) continue;
                (name == "path"   ? location.path
                 : name == "root" ? location.root
                                  : location.handler) = *text;
            } else if (name == "exact") {
                if (auto exact = boolean(value, name)) location.exact = *exact;
            } else if (name == "headers") {
                read_header_rules(*this, value, own, true);
            } else if (name == "auth") {
                read_auth_rules(*this, value, own, true);
            } else if (name == "access") {
                read_access_rules(*this, value, own);
            } else if (name == "limits") {
                read_limit_rules(*this, value, own);
            } else if (name == "conn_limit") {
                read_conn_limit(*this, value, own);
            } else if (name == "try_files") {
                try_files = &value;
                read_try_files(value, own);
            } else if (name == "proxy") {
                proxy = &value;
                read_location_proxy(value, own);
            } else {
                error(value, "unknown key '" + std::string(name) + "' in locations");
            }
        }
        if (!location.path.starts_with('/'))
            return error(table, "a location needs a path starting with /");
        if (location.path.find("/../") != std::string::npos ||
            location.path.find("/./") != std::string::npos ||
            location.path.find("//") != std::string::npos || location.path.ends_with("/.."))
            return error(table, "a location's path is a normalised path (no //, . or ..)");
        // `proxy` alone says the handler; `handler = "proxy"` needs it.
        if (location.handler.empty() && proxy) location.handler = "proxy";
        if (location.handler.empty() && !location.root.empty()) location.handler = "static";
        if (!location.handler.empty() && location.handler != "static" &&
            location.handler != "fastcgi" && location.handler != "proxy")
            return error(table, "a location's handler is static, fastcgi or proxy");
        if (location.handler == "proxy") {
            if (!proxy) return error(table, R"(handler = "proxy" needs proxy = { address = ... })");
            if (!location.root.empty())
                return error(table, "a proxy location has no root: the backend answers it");
            if (try_files)
                return error(*try_files, "a proxy location has no try_files: the backend "
                                         "answers every path of it");
        } else if (proxy) {
            return error(*proxy, R"(a location with proxy has handler = "proxy")");
        } else if (location.root.empty() && !location.handler.empty()) {
            return error(table, "handler = \"" + location.handler +
                                    "\" needs a 'root'; without one the location is served as "
                                    "the site is");
        }
        bool same = std::any_of(
            site.locations.begin(), site.locations.end(), [&](const SiteLocation& other) {
                return other.path == location.path && other.exact == location.exact;
            });
        if (same) return error(table, "another location has the path '" + location.path + "'");
        site.locations.push_back(std::move(location));
    }
};

} // namespace

void read_locations(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    LocationReader(reader).locations(node, site);
}

} // namespace lepus::detail
