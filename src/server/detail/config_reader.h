// Reading a config file's values with file:line:column in every error
// (internal to the config_*.cc files, which share the [[site]] keys between
// them: config_file.cc reads the file and the plain keys, each table with
// rules of its own has a reader in its own file).
#pragma once

#include "base/units.h"
#include "server/config_file.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <toml++/toml.h>
#include <vector>

namespace lepus::detail {

// "FILE:LINE:COLUMN" of a node, the prefix of every message about it.
std::string config_position(const std::string& path, const toml::source_region& region);

// A scalar TOML value as command-line text; nullopt for tables and arrays.
std::optional<std::string> scalar_text(const toml::node& node);

// Typed reads of one value: each returns nullopt (and records an error naming
// the key) when the value has the wrong type or range.
class ConfigReader {
public:
    ConfigReader(const std::string& path, std::vector<std::string>& errors)
        : path_(path), errors_(errors) {}

    void error(const toml::node& node, const std::string& what) {
        errors_.push_back(config_position(path_, node.source()) + ": " + what);
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

    const std::string& path() const { return path_; }

protected:
    const std::string& path_;
    std::vector<std::string>& errors_;
};

// The [[site]] keys whose values are tables of their own
// (config_site_tables.cc); each records its errors in `reader`.
void read_fastcgi(ConfigReader& reader, const toml::node& node, SiteConfig& site);
// `fastcgi_params = { NAME = "VALUE", ... }`, at the top or in a [[site]].
void read_fastcgi_params(ConfigReader& reader, const toml::node& node,
                         std::vector<std::pair<std::string, std::string>>& params);
void read_proxy(ConfigReader& reader, const toml::node& node, SiteConfig& site);
void read_error_pages(ConfigReader& reader, const toml::node& node, SiteConfig& site);
// `in_location`: read for a location's own SiteConfig (SiteLocation::own),
// where a rule without `match` (headers) or `paths` (auth) covers all of it.
void read_header_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site,
                       bool in_location = false);
void read_auth_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site,
                     bool in_location = false);
void read_redirects(ConfigReader& reader, const toml::node& node, SiteConfig& site);
void read_tls(ConfigReader& reader, const toml::node& node, SiteConfig& site);
// access, limits and conn_limit (config_limits.cc).
void read_access_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site);
void read_limit_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site);
void read_conn_limit(ConfigReader& reader, const toml::node& node, SiteConfig& site);
// `locations` (config_locations.cc).
void read_locations(ConfigReader& reader, const toml::node& node, SiteConfig& site);

} // namespace lepus::detail
