// What `lepus -t` checks beyond the options themselves, and what `lepus -V`
// prints: the parts of start-up that can be checked without binding a port.
#include "server/start_checks.h"

#include "net/tls_context.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <grp.h>
#include <link.h>
#include <pwd.h>
#include <string_view>
#include <sys/stat.h>
#include <toml++/impl/version.h> // TOML_LIB_*, for -V
#include <unistd.h>

// Defined when tcmalloc is linked (-V reports it).
extern "C" const char* tc_version(int* major, int* minor, const char** patch) __attribute__((weak));

namespace lepus {
namespace {

// The shared libraries among `wanted` that this process has loaded, as their
// real file names ("liburing.so.2.3"): the versions it runs with, not those it
// was built against.
std::vector<std::string> loaded_libraries(const std::vector<std::string>& wanted) {
    struct Search {
        const std::vector<std::string>* wanted;
        std::vector<std::string> found;
    } search{&wanted, {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto& search = *static_cast<Search*>(data);
            char real[PATH_MAX];
            if (!info->dlpi_name || !realpath(info->dlpi_name, real)) return 0;
            std::string_view name = real;
            name.remove_prefix(name.rfind('/') + 1);
            for (const std::string& prefix : *search.wanted)
                if (name.starts_with(prefix + ".so") || name.starts_with(prefix + "_minimal.so"))
                    search.found.emplace_back(name);
            return 0;
        },
        &search);
    return search.found;
}

} // namespace

void print_build_info() {
    std::printf("lepus %s\n", LEPUS_VERSION);
#if defined(__clang__)
    std::printf("built with clang %s\n", __clang_version__);
#elif defined(__GNUC__)
    std::printf("built with gcc %s\n", __VERSION__);
#endif
#ifdef NDEBUG
    std::printf("build: optimised, assertions off");
#else
    std::printf("build: assertions on");
#endif
#if defined(__SANITIZE_ADDRESS__)
    std::printf(", AddressSanitizer");
#endif
#if defined(__SANITIZE_THREAD__)
    std::printf(", ThreadSanitizer");
#endif
    std::printf("\nlibraries: CLI11 %s, toml++ %d.%d.%d", CLI11_VERSION, TOML_LIB_MAJOR,
                TOML_LIB_MINOR, TOML_LIB_PATCH);
    for (const std::string& library : loaded_libraries({"liburing", "libssl", "libtcmalloc"}))
        std::printf(", %s", library.c_str());
    // tcmalloc_minimal exports tc_version; without it malloc is glibc's.
    std::printf("\ntcmalloc: %s\n", tc_version ? "on" : "off (glibc malloc)");
}

namespace {

// Who lepus runs as once started: --user/--group, else whoever runs it.
struct ServiceIdentity {
    uid_t uid = geteuid();
    std::vector<gid_t> groups{getegid()}; // the primary group first
};

// -t: the user and group must exist (start-up drops to them after binding).
bool resolve_identity(const ServerOptions& options, ServiceIdentity& identity,
                      std::vector<std::string>& errors) {
    const passwd* user = nullptr;
    if (!options.user.empty()) {
        if ((user = getpwnam(options.user.c_str())) == nullptr) {
            errors.push_back("no such user '" + options.user + "' (--user)");
        } else {
            identity.uid = user->pw_uid;
            identity.groups = {user->pw_gid};
        }
    }
    if (!options.group.empty()) {
        const group* g = getgrnam(options.group.c_str());
        if (!g)
            errors.push_back("no such group '" + options.group + "' (--group)");
        else
            identity.groups = {g->gr_gid};
    }
    if (user) {
        // initgroups() gives the user its supplementary groups at the drop.
        int count = 64;
        std::vector<gid_t> more(static_cast<size_t>(count));
        if (getgrouplist(user->pw_name, identity.groups.front(), more.data(), &count) >= 0)
            identity.groups.insert(identity.groups.end(), more.begin(), more.begin() + count);
    }
    return errors.empty();
}

// Whether `identity` has the access `bits` (a mix of 4 read, 2 write, 1
// search) to the file `st`, by the mode bits as the kernel checks them: the
// owner's bits for the owner, else the group's for a member, else the
// others' (ACLs aside).
bool allowed(const struct stat& st, const ServiceIdentity& identity, mode_t bits) {
    if (identity.uid == 0) return true;
    if (st.st_uid == identity.uid) return ((st.st_mode >> 6) & bits) == bits;
    if (std::find(identity.groups.begin(), identity.groups.end(), st.st_gid) !=
        identity.groups.end())
        return ((st.st_mode >> 3) & bits) == bits;
    return (st.st_mode & bits) == bits;
}

// Whether `identity` may write `path` (for a directory: create files in it).
bool writable_by(const std::string& path, const ServiceIdentity& identity) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return false;
    return allowed(st, identity, S_ISDIR(st.st_mode) ? 3 : 2);
}

// Empty when `identity` can read `path` (list it, for a directory) and reach
// it through every directory above; else the first place that stops it.
// A path that does not exist is another check's to report.
std::string unreadable_by(const std::string& path, const ServiceIdentity& identity) {
    char real[PATH_MAX];
    if (!realpath(path.c_str(), real)) return {};
    std::string_view full = real;
    for (size_t slash = 0; (slash = full.find('/', slash + 1)) != std::string_view::npos;) {
        std::string above(full.substr(0, slash));
        struct stat st;
        if (stat(above.empty() ? "/" : above.c_str(), &st) == 0 && !allowed(st, identity, 1))
            return "directory '" + above + "' is not searchable";
    }
    struct stat st;
    if (stat(real, &st) != 0) return {};
    if (!allowed(st, identity, S_ISDIR(st.st_mode) ? 5 : 4)) return "it is not readable";
    return {};
}

// -t as root: what the service user reads after the drop. Roots are served
// by it, and a reload reads the certificates, keys and htpasswd files again
// as it: one line per path it cannot read.
void check_readable(const ServerOptions& options, const ServiceIdentity& identity,
                    const std::string& who, std::vector<std::string>& errors) {
    auto check = [&](const std::string& what, const std::string& path, const char* why) {
        if (std::string problem = unreadable_by(path, identity); !problem.empty())
            errors.push_back(what + " '" + path + "' cannot be read by " + who + ": " + problem +
                             why);
    };
    const char* served = " (it serves the files as that user)";
    const char* reread = " (a reload reads it again as that user)";
    if (options.sites.empty()) check("root", options.root, served);
    for (const std::string& cert : options.tls_cert)
        check("tls_cert", cert, reread);
    for (const std::string& key : options.tls_key)
        check("tls_key", key, reread);
    for (const SiteConfig& site : options.sites) {
        check(site.origin + ": root", site.root, served);
        for (const SiteTls& pair : site.tls) {
            check(site.origin + ": tls cert", pair.cert, reread);
            check(site.origin + ": tls key", pair.key, reread);
        }
        for (const AuthRule& rule : site.auth)
            check(rule.origin + ": htpasswd", rule.htpasswd, reread);
    }
}

// A log file lepus opens (as root, before the drop) and must reopen on SIGUSR1
// as the service user, in a directory where that user can create it.
void check_log_path(const std::string& path, const std::string& what,
                    const ServiceIdentity& identity, std::vector<std::string>& errors) {
    if (path == "-" || path == "off" || path.empty()) return;
    size_t slash = path.rfind('/');
    std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    struct stat st;
    if (stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        errors.push_back(what + " '" + path + "': directory '" + directory + "' does not exist");
    else if (!writable_by(directory, identity))
        errors.push_back(what + " '" + path + "': directory '" + directory +
                         "' is not writable by uid " + std::to_string(identity.uid) +
                         " (SIGUSR1 creates the file anew there)");
    // An existing file is opened for appending by whoever starts lepus (root
    // gives it to --user afterwards).
    else if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0)
        errors.push_back(what + " '" + path + "' is not writable");
}

} // namespace

// Who root runs as when not told: Debian's nginx runs its workers as
// www-data, nginx's compiled-in default is nobody.
constexpr const char* kDefaultUsers[] = {"www-data", "nobody"};

std::string protect_from_root(ServerOptions& options, bool root_given) {
    if (!options.signal.empty()) return {}; // -s serves nothing
    char cwd[PATH_MAX];
    // `cd / && lepus` would serve the whole file system, /etc/shadow included
    // for a root that stays root; a [[site]] serves its own root instead.
    if (!root_given && options.sites.empty() && options.root == "." && getcwd(cwd, sizeof cwd) &&
        std::string_view(cwd) == "/")
        return "the current directory is /: give ROOT / to serve the whole file system";
    if (!options.user.empty()) {
        const passwd* user = getpwnam(options.user.c_str());
        if (user && user->pw_uid == 0 && !options.allow_root)
            return "--user " + options.user +
                   " serves every file root can read: add --allow-root if that is meant";
        return {};
    }
    if (geteuid() != 0 || options.allow_root) return {};
    for (const char* name : kDefaultUsers)
        if (getpwnam(name)) {
            options.user = name;
            options.user_defaulted = true;
            return {};
        }
    return "started as root, and neither www-data nor nobody exists to run as: give --user "
           "(or --allow-root)";
}

std::vector<std::string> check_start_up(const ServerOptions& options) {
    std::vector<std::string> errors;
    if ((!options.user.empty() || !options.group.empty()) && geteuid() != 0)
        errors.emplace_back("--user/--group need lepus to start as root");
    ServiceIdentity identity;
    if (!resolve_identity(options, identity, errors)) return errors;
    // Issue 33: root checks what the user it will run as can read.
    if (identity.uid != geteuid()) {
        std::string who =
            "user " + (options.user.empty() ? std::to_string(identity.uid) : options.user);
        check_readable(options, identity, who, errors);
        std::fprintf(stderr, "lepus: -t as uid %u: checked what %s can read and write\n",
                     unsigned(geteuid()), who.c_str());
    }
    check_log_path(options.access_log, "access log", identity, errors);
    check_log_path(options.error_log, "error log", identity, errors);
    for (const SiteConfig& site : options.sites)
        if (site.access_log)
            check_log_path(*site.access_log, site.origin + ": access_log", identity, errors);
    return errors;
}

std::string check_tls(const ServerOptions& options) {
    if (!uses_tls(options)) return {};
    if (options.tls_cert.size() != options.tls_key.size())
        return "--tls-cert and --tls-key come in pairs (" +
               std::to_string(options.tls_cert.size()) + " certificates, " +
               std::to_string(options.tls_key.size()) + " keys)";
    std::string error;
    SslContextRef context = build_tls_context(tls_settings(options), error);
    return context ? std::string() : error;
}

} // namespace lepus
