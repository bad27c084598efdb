// TryFiles: nginx's `try_files` for a site, evaluated by the router before the
// handlers. Each candidate but the last names a file ("$uri", "$uri.html") or
// a directory ("$uri/") that is served if it exists; the last is where every
// other request goes: a URI, with its query ("/index.php?$query_string": a
// front controller; "/index.html": a single-page application), or a status
// ("=404"). The request is re-routed internally: the client's target stays
// the REQUEST_URI a script sees, as with nginx.
//
//   try_files = ["$uri", "$uri/", "/index.php?$query_string"]   (config)
//   --try-files '$uri $uri/ /index.php?$query_string'            (command line)
//   --spa  =  try_files $uri $uri/ /index.html
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

struct TryFiles {
    struct Candidate {
        std::string path;  // with "$uri" in it, before expansion; empty for a status
        std::string query; // the fallback's query template ("$query_string", "$args")
        bool has_query = false;
        int status = 0; // "=404": the last candidate answers this status
        // "$uri/": a folder is looked for; "$uri": a file (nginx decides from
        // the template, not from the expanded path).
        bool wants_directory() const { return path.size() > 1 && path.back() == '/'; }
    };
    std::vector<Candidate> candidates; // at least two; only the last may be a status

    // "$uri" in a candidate's path replaced by the request's decoded path.
    static void expand_path(const Candidate& candidate, std::string_view uri, std::string& out);
    // "$query_string" and "$args" in the fallback's query replaced by the
    // request's query, "$uri" by its decoded path, escaped for a query value
    // (DokuWiki's "/doku.php?id=$uri&$args", as nginx expands it).
    static void expand_query(const Candidate& candidate, std::string_view uri,
                             std::string_view query, std::string& out);
};

// Parses try_files words; each may hold several candidates separated by spaces.
// nullopt and one line in `error` for anything nginx would refuse, or a path
// that does not start with "/" or "$uri".
std::optional<TryFiles> parse_try_files(const std::vector<std::string>& words, std::string& error);

// What --spa means.
inline const std::vector<std::string>& spa_try_files() {
    static const std::vector<std::string> words = {"$uri", "$uri/", "/index.html"};
    return words;
}

} // namespace lepus
