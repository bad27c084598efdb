// The [[site]] keys of per-client limits and access rules: access, limits,
// conn_limit (detail/config_reader.h; the rules are config_file.h's
// AccessRule and LimitRule, applied by the router's steps, server/limits.h).
#include "server/detail/config_reader.h"

#include <atomic>

namespace lepus::detail {
namespace {

// Every rule read gets keys of its own in the client table: two sites (or a
// reloaded config) never share buckets. Zone 1 is --conn-limit's.
uint32_t next_zone() {
    static std::atomic<uint32_t> zone{2};
    return zone.fetch_add(1, std::memory_order_relaxed);
}

// "10r/s" or "30r/m" (nginx's limit_req_zone rate) in requests per 1000 s.
std::optional<uint64_t> parse_rate(std::string_view text) {
    size_t r = text.find("r/");
    if (r == 0 || r == std::string_view::npos || r > 7) return std::nullopt; // < 10^7 r/s
    uint64_t count = 0;
    for (char c : text.substr(0, r)) {
        if (c < '0' || c > '9') return std::nullopt;
        count = count * 10 + uint64_t(c - '0');
    }
    std::string_view unit = text.substr(r + 2);
    uint64_t rate = unit == "s" ? count * 1000 : unit == "m" ? count * 1000 / 60 : 0;
    if (rate == 0) return std::nullopt; // "0r/s", or another unit
    return rate;
}

class LimitTables : public ConfigReader {
public:
    explicit LimitTables(const ConfigReader& reader) : ConfigReader(reader) {}

    // The paths of a rule: prefixes of the decoded path, so each starts with '/'.
    bool paths(const toml::node& value, std::vector<std::string>& out, const char* what) {
        auto list = strings(value, "paths");
        if (!list) return false;
        for (const std::string& path : *list)
            if (!path.starts_with('/')) {
                error(value, std::string(what) + " paths start with /");
                return false;
            }
        if (list->empty()) {
            error(value, std::string(what) + " paths: give at least one, or leave 'paths' out");
            return false;
        }
        out = *list;
        return true;
    }

    void networks(const toml::node& value, std::string_view key, std::vector<Cidr>& out) {
        auto list = strings(value, key);
        if (!list) return;
        for (const std::string& text : *list) {
            std::string message;
            if (auto network = parse_cidr(text, message))
                out.push_back(*network);
            else
                error(value, "access " + std::string(key) + ": " + message);
        }
    }

    void access_rules(const toml::node& node, SiteConfig& site) {
        const toml::array* array = node.as_array();
        if (const toml::table* table = node.as_table()) return access_rule(*table, site);
        if (!array || !array->is_array_of_tables())
            return error(node, "'access' is a list of {paths, allow, deny} tables");
        for (const toml::node& item : *array)
            access_rule(*item.as_table(), site);
    }

    void access_rule(const toml::table& table, SiteConfig& site) {
        AccessRule rule;
        rule.origin = config_position(path_, table.source());
        for (auto&& [key, value] : table) {
            std::string_view name = key.str();
            if (name == "paths")
                paths(value, rule.paths, "access");
            else if (name == "allow")
                networks(value, name, rule.allow);
            else if (name == "deny")
                networks(value, name, rule.deny);
            else
                error(value, "unknown key '" + std::string(name) + "' in access");
        }
        if (rule.allow.empty() && rule.deny.empty())
            return error(table, "an access rule needs 'allow' or 'deny' (or both)");
        site.access.push_back(std::move(rule));
    }

    void limit_rules(const toml::node& node, SiteConfig& site) {
        const toml::array* array = node.as_array();
        if (const toml::table* table = node.as_table()) return limit_rule(*table, site);
        if (!array || !array->is_array_of_tables())
            return error(node, "'limits' is a list of {paths, rate, burst, nodelay} tables");
        for (const toml::node& item : *array)
            limit_rule(*item.as_table(), site);
    }

    void limit_rule(const toml::table& table, SiteConfig& site) {
        LimitRule rule;
        rule.origin = config_position(path_, table.source());
        bool rate_given = false;
        for (auto&& [key, value] : table) {
            std::string_view name = key.str();
            if (name == "paths") {
                paths(value, rule.paths, "limits");
            } else if (name == "rate") {
                rate_given = true;
                auto text = string(value, name);
                auto rate = text ? parse_rate(*text) : std::nullopt;
                if (rate)
                    rule.rate = *rate;
                else if (text)
                    error(value, "'rate' is requests per second or minute, such as \"10r/s\" "
                                 "or \"30r/m\"");
            } else if (name == "burst") {
                auto burst = value.is_integer() ? value.value<int64_t>() : std::nullopt;
                if (burst && *burst >= 0 && *burst < (1 << 20))
                    rule.burst = uint64_t(*burst);
                else
                    error(value, "'burst' must be a whole number from 0");
            } else if (name == "nodelay") {
                if (auto b = boolean(value, name)) rule.nodelay = *b;
            } else if (name == "status") {
                auto status = value.is_integer() ? value.value<int64_t>() : std::nullopt;
                if (status && *status >= 400 && *status <= 599)
                    rule.status = int(*status);
                else
                    error(value, "'status' must be a 4xx or 5xx status");
            } else {
                error(value, "unknown key '" + std::string(name) + "' in limits");
            }
        }
        if (!rate_given) return error(table, "a limits rule needs a 'rate' such as \"10r/s\"");
        if (rule.rate == 0) return; // its error is recorded
        rule.zone = next_zone();
        site.limits.push_back(std::move(rule));
    }
};

} // namespace

void read_access_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    LimitTables(reader).access_rules(node, site);
}

void read_limit_rules(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    LimitTables(reader).limit_rules(node, site);
}

void read_conn_limit(ConfigReader& reader, const toml::node& node, SiteConfig& site) {
    if (auto limit = reader.count(node, "conn_limit")) {
        site.conn_limit = *limit;
        site.conn_zone = next_zone();
    }
}

} // namespace lepus::detail
