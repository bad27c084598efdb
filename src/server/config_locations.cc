// The [[site]] key `locations` (config_file.h: SiteLocation).
#include "server/detail/config_reader.h"

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
    void location(const toml::table& table, SiteConfig& site) {
        SiteLocation location;
        location.origin = config_position(path_, table.source());
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
            } else if (name == "headers" || name == "auth" || name == "try_files" ||
                       name == "proxy") {
                // Not yet per location: the site's own keys match path prefixes.
                error(value, "'" + std::string(name) +
                                 "' in a location is not supported yet: use the site's, "
                                 "with the location's path as the prefix");
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
        if (location.root.empty()) return error(table, "a location needs a 'root'");
        if (location.handler != "static" && location.handler != "fastcgi")
            return error(table, "a location's handler is static or fastcgi");
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
