// The config file: `lepus --config lepus.toml`.
//
// Top-level keys are the command-line options with dashes turned into
// underscores (`access_log` is `--access-log`, `listen` an array). They are
// turned back into arguments and parsed by the very same CLI11 definitions, so
// every option has a key and both are validated alike; options given on the
// command line win. `[[site]]` blocks describe virtual hosts.
#pragma once

#include "net/cidr.h"
#include "server/try_files.h"
#include "server/x_accel.h"
#include "upstream/group.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lepus {

// Extra response header for requests whose path matches.
struct HeaderRule {
    std::string match; // "*.css" (extension), "/static/" (path prefix), or "*" (everything)
    std::string name;
    std::string value;
};

class PathPattern;
class AccessLogFormat;

// `redirects = [...]` in a [[site]], tried in their order, the first that
// matches the decoded path wins (as nginx's rewrite directives run in order):
//   { from = "/old", to = "/new" }                      exactly this path
//   { from = "/old/", to = "/new/", prefix = true }     /old/a?b -> /new/a?b
//   { pattern = "^/blog/(\\d+)/(.*)$", to = "/posts/$1/$2" }   PCRE2, $1..$9
// With `rewrite = true` the request is served as `to` instead (nginx's
// `rewrite ... last`: same method, headers and body, no round trip).
struct Redirect {
    std::string from; // exact path, or with `prefix` a path prefix
    std::string to;   // URL or path
    int status = 301; // 301, 302, 307 or 308
    bool prefix = false;
    bool rewrite = false;
    std::string pattern = {};                         // instead of `from`
    std::shared_ptr<const PathPattern> compiled = {}; // `pattern`, compiled when read
};

struct SiteFastCgi {
    std::vector<std::string> addresses; // several: balanced (`balance`, `weights`)
    upstream::Balancing balancing;
    std::vector<std::string> ext;
    std::optional<unsigned> pool, queue;
    std::optional<uint64_t> timeout_ms;
    std::optional<bool> keepalive; // unset: --fastcgi-keepalive
};

// `proxy = { address = "127.0.0.1:3000", paths = ["/api/"] }` in a [[site]]:
// an HTTP backend (or several, round robin: `address` as an array) for the
// paths under these prefixes, or, without `paths`, for whatever the site's
// files do not have (nginx's try_files $uri @app).
struct SiteProxy {
    std::vector<std::string> addresses;
    upstream::Balancing balancing;  // `balance`, `hash_key`, `weights`
    std::vector<std::string> paths; // decoded path prefixes; empty: after the files
    std::string host;               // the Host sent to the backend; empty: the client's
    std::optional<unsigned> pool, queue;
    std::optional<uint64_t> timeout_ms;
};

// `tls = { cert = "...", key = "..." }` in a [[site]] (or a list of them: RSA and ECDSA).
struct SiteTls {
    std::string cert; // PEM, the chain after the leaf
    std::string key;
    std::string origin = {}; // "lepus.toml:9:7", for messages
};

class Htpasswd;

// `auth = [{ paths = ["/admin/"], realm = "Admin", htpasswd = "/etc/lepus/htpasswd" }]`
// in a [[site]]: HTTP basic auth (RFC 7617) for the paths under these
// prefixes, as nginx's auth_basic + auth_basic_user_file in a location. The
// longest prefix of any rule wins; `{ paths = [...], off = true }` opens a
// part of a protected tree again (nginx's `auth_basic off`).
struct AuthRule {
    std::vector<std::string> paths; // prefixes of the decoded, normalised path
    std::string realm = "Restricted";
    std::string htpasswd; // the file's path
    bool off = false;     // no auth under these paths
    // `case_insensitive = true`: prefixes match in any ASCII case, for a
    // backend that reads /Admin/ as /admin/ (a case-insensitive file system).
    bool case_insensitive = false;
    std::shared_ptr<const Htpasswd> users; // the file, read by load_site_auth()
    std::string origin;                    // "lepus.toml:12:1", for messages
};

// `access = [{ paths = ["/admin/"], allow = ["10.0.0.0/8"], deny = ["0.0.0.0/0", "::/0"] }]`
// in a [[site]]: nginx's allow / deny for the paths under these prefixes (the
// longest prefix of any rule wins; no paths: the whole site). Within the rule
// allow is checked before deny; an address in neither passes; a denied one gets 403.
struct AccessRule {
    std::vector<std::string> paths = {"/"}; // prefixes of the decoded, normalised path
    std::vector<Cidr> allow, deny;
    std::string origin; // "lepus.toml:12:1", for messages
};

// `limits = [{ paths = ["/wp-login.php"], rate = "10r/m", burst = 5, nodelay = true }]`
// in a [[site]]: nginx's limit_req per client address (server/limits.h).
struct LimitRule {
    std::vector<std::string> paths = {"/"}; // prefixes of the decoded, normalised path
    uint64_t rate = 0;                      // requests per 1000 s (nginx's unit: "10r/m" is 166)
    uint64_t burst = 0; // requests beyond the rate let through (delayed without nodelay)
    bool nodelay = false;
    int status = 429;   // `status = N`: the answer over the limit (4xx or 5xx)
    uint32_t zone = 0;  // the rule's keys in the client table (unique per rule read)
    std::string origin; // "lepus.toml:12:1", for messages
};

struct SiteConfig;

// `locations = [{ path = "/wp-content/", root = "/var/lib/wordpress/wp-content" }]`
// in a [[site]]: the paths under `path` are files of `root`, the prefix cut
// off (nginx's `location /wp-content/ { alias ...; }`: /wp-content/uploads/a.jpg
// is ROOT/uploads/a.jpg). `exact = true` matches the one path only (nginx's
// `location =`). An exact location wins, then the longest prefix. Without a
// root, the location's paths are the site's files and scripts (nginx's
// location without alias) and only its own keys below differ.
struct SiteLocation {
    std::string path;
    std::string root; // empty: the site's
    bool exact = false;
    // "static": files only, the default with a root (a path the site would
    // run as a script answers 403 there, never its source); "fastcgi":
    // scripts under the root go to the site's backend, with this root as
    // DOCUMENT_ROOT; "proxy": the location's own `proxy` backend answers;
    // empty (no root): as the site does.
    std::string handler;
    // The keys a location may set for its requests, read by the site's own
    // readers into a SiteConfig of its own: headers, auth, access, limits,
    // conn_limit, try_files, proxy. A key the location sets replaces the
    // site's for its paths (as nginx's location-level directives do), but
    // for headers, which add to the site's (a name both set: the location's).
    std::shared_ptr<SiteConfig> own;
    std::string origin; // "lepus.toml:12:1", for messages
};

struct SiteConfig {
    std::vector<std::string> server_names; // "example.com", "*.example.com"
    bool is_default = false;               // `default = true`, or the first site
    std::string root;
    std::optional<std::vector<std::string>> index;
    std::optional<bool> autoindex, dotfiles_allow, compress;
    std::optional<bool> request_buffering; // false: bodies stream to the backend
    std::optional<std::string> symlinks;   // "beneath", "follow", "owner"
    std::optional<std::string> access_log;
    // `access_log_format`: "combined", "json" or a text with $variables,
    // compiled when read; null: the top level's (--access-log-format).
    std::shared_ptr<const AccessLogFormat> access_log_format;
    std::optional<SiteFastCgi> fastcgi;
    // `fastcgi_params = { SERVER_SOFTWARE = "nginx" }`: on top of --fastcgi-param.
    std::vector<std::pair<std::string, std::string>> fastcgi_params;
    std::optional<SiteProxy> proxy;
    std::map<int, std::string> error_pages; // status -> path under the root
    std::vector<HeaderRule> headers;
    std::vector<Redirect> redirects;
    std::vector<SiteTls> tls; // chosen by SNI among the server_names
    bool tls_acme = false;    // tls = "acme": from the ACME CA (server/acme_options.h)
    // `https_redirect = true | PORT`: a request that came over plain HTTP gets
    // 301 to https://HOST[:PORT]/same-target (0: off; 443 is written without a port).
    uint16_t https_redirect = 0;
    bool https_redirect_given = false; // an ACME site redirects unless it says false
    // `try_files = [...]` or `spa = true` (see server/try_files.h); nullopt: the top level's.
    std::optional<TryFiles> try_files;
    // `x_accel = "/protected/=/srv/files"` (server/x_accel.h); nullopt: the top level's.
    std::optional<XAccel> x_accel;
    std::vector<AuthRule> auth;     // `auth = [...]` (see AuthRule)
    std::vector<AccessRule> access; // `access = [...]` (see AccessRule)
    std::vector<LimitRule> limits;  // `limits = [...]` (see LimitRule)
    // `conn_limit = N`: requests in progress (connections, HTTP/2 streams) per
    // client address on this site; 0: --conn-limit's, counted over all sites.
    unsigned conn_limit = 0;
    uint32_t conn_zone = 0;              // its keys in the client table
    std::vector<SiteLocation> locations; // `locations = [...]` (see SiteLocation)
    std::string origin;                  // "lepus.toml:12:1", for messages
};

struct ConfigFile {
    // "--access-log", "/var/log/lepus/access.log", ... and "ROOT" for `root`.
    std::vector<std::string> arguments;
    // For messages about arguments: "--access-log" -> "lepus.toml:3:1".
    std::map<std::string, std::string> origins;
    std::vector<SiteConfig> sites;
};

// What `lepus -t` checks when no --config is given (the package's config).
inline constexpr const char* kDefaultConfigPath = "/etc/lepus/lepus.toml";

// Reads and checks `path`. On failure returns false with one message per
// problem, each "FILE:LINE:COLUMN: what" (unknown keys are errors).
bool load_config_file(const std::string& path, ConfigFile& out, std::vector<std::string>& errors);

// The command line to parse: `--config FILE` (or `-c FILE`) in argv is replaced
// by the file's arguments, placed before the others so that the command line
// wins; a list option given on the command line replaces the file's list.
// Returns false with the errors when the file cannot be used. `check_only`
// tells whether `-t` was given; `sites` receives the [[site]] blocks. `-t`
// without --config reads kDefaultConfigPath ($LEPUS_DEFAULT_CONFIG when set).
bool expand_config_argument(int argc, char** argv, std::vector<std::string>& expanded,
                            std::vector<SiteConfig>& sites,
                            std::map<std::string, std::string>& origins, bool& check_only,
                            std::string& config_path, std::vector<std::string>& errors);

} // namespace lepus
