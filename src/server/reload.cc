#include "server/reload.h"

#include "base/unique_fd.h"
#include "log/error_log.h"
#include "net/quic_tls.h"
#include "net/socket.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"
#include "server/sd_notify.h"
#include "server/site_table.h"
#include "server/worker.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <grp.h>
#include <memory>
#include <pwd.h>
#include <sys/mman.h>
#include <unistd.h>

namespace lepus {
namespace {

// What a reload changes in the listening sockets: the new ones are opened (and
// bound) before anything else changes, so a taken port refuses the reload.
// With in-reactor accept each new address gets one SO_REUSEPORT socket per
// reactor, as at start-up; an address another process holds is refused.
struct ListenChange {
    struct Opened {
        std::string text;
        std::vector<UniqueFd> fds; // one, or one per reactor
    };
    std::vector<Opened> opened;
    std::vector<std::string> closed;

    bool open(const ServerOptions& next, const Listening& listening, std::string& error) {
        bool in_reactors = listening.reuseport != nullptr;
        size_t copies = in_reactors ? listening.reuseport->reactors() : 1;
        auto listed = [&](const std::string& text) {
            return std::any_of(listening.sockets.begin(), listening.sockets.end(),
                               [&](const auto& item) { return item.first == text; }) ||
                   std::any_of(opened.begin(), opened.end(),
                               [&](const Opened& item) { return item.text == text; });
        };
        for (const std::string& text : next.listen) {
            if (listed(text)) continue;
            if (in_reactors && text.starts_with("unix:")) {
                error = "the reactors accept for themselves: " + text +
                        " needs the acceptor thread (restart with --accept acceptor)";
                return false;
            }
            ListenAddress address = *parse_listen(split_listen_scheme(text).address);
            Opened item{text,
                        open_listeners(address, listen_options(next, in_reactors), copies, error)};
            if (item.fds.empty()) return false;
            opened.push_back(std::move(item));
        }
        for (const auto& [text, fd] : listening.sockets)
            if (std::find(next.listen.begin(), next.listen.end(), text) == next.listen.end())
                closed.push_back(text);
        return true;
    }
    bool empty() const { return opened.empty() && closed.empty(); }
    // Hands the new sockets to the acceptor (or the reactors) and has it (them)
    // close the old ones.
    void apply(Listening& listening) {
        std::vector<UniqueFd> added;
        std::vector<int> removed, added_tls, added_h2c;
        for (Opened& item : opened) {
            log_info("SIGHUP: listening on %s", item.text.c_str());
            listening.sockets.emplace_back(item.text, item.fds.front().get());
            ListenScheme scheme = split_listen_scheme(item.text);
            if (listening.reuseport) {
                listening.reuseport->add_running(item.text, std::move(item.fds), scheme.tls,
                                                 scheme.h2c);
                continue;
            }
            if (scheme.tls) added_tls.push_back(item.fds.front().get());
            if (scheme.h2c) added_h2c.push_back(item.fds.front().get());
            added.push_back(std::move(item.fds.front()));
        }
        for (const std::string& text : closed) {
            log_info("SIGHUP: no longer listening on %s", text.c_str());
            auto it = std::find_if(listening.sockets.begin(), listening.sockets.end(),
                                   [&](const auto& item) { return item.first == text; });
            removed.push_back(it->second);
            listening.sockets.erase(it);
            if (auto address = parse_listen(split_listen_scheme(text).address))
                remove_unix_listener(*address);
            if (listening.reuseport) listening.reuseport->remove_running(text);
        }
        if (listening.acceptor)
            listening.acceptor->change_listeners(std::move(added), std::move(removed),
                                                 std::move(added_tls), std::move(added_h2c));
    }
};

// Runs `parse` with stderr going to a memory file and returns what it wrote:
// the config checker prints one "lepus: FILE:LINE:COL: what" line per problem
// there, and on SIGHUP those lines must also reach the error log (issue 33:
// "the configuration is invalid (see stderr)" told the admin nothing under
// systemd). The lines are written to the real stderr as well.
template <typename Parse> std::string capture_stderr(Parse&& parse) {
    UniqueFd memory(memfd_create("lepus-reload-errors", MFD_CLOEXEC));
    UniqueFd saved(memory ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0) : -1);
    if (!saved || dup2(memory.get(), STDERR_FILENO) < 0) {
        parse();
        return {};
    }
    parse();
    std::fflush(stderr);
    dup2(saved.get(), STDERR_FILENO);
    std::string text;
    char buffer[4096];
    for (off_t at = 0;;) {
        ssize_t n = pread(memory.get(), buffer, sizeof buffer, at);
        if (n <= 0) break;
        text.append(buffer, size_t(n));
        at += n;
    }
    if (!text.empty()) std::fputs(text.c_str(), stderr);
    return text;
}

// sd_notify(3) for Type=notify-reload (systemd 253+) wants the
// CLOCK_MONOTONIC time of the reload with RELOADING=1; older systemd ignores it.
std::string reloading_message() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return "RELOADING=1\nMONOTONIC_USEC=" +
           std::to_string(uint64_t(now.tv_sec) * 1000000 + uint64_t(now.tv_nsec) / 1000);
}

} // namespace

void reload(int argc, char** argv, const ServerOptions& current,
            const std::vector<Worker*>& workers, SiteLogs& site_logs, Listening& listening,
            std::optional<ServerOptions>* applied) {
    notify_service_manager(reloading_message());
    // READY=1 again however the reload ends: lepus keeps serving either way.
    // STATUS= says how it ended, so that `systemctl status` shows a refusal.
    struct ReadyAgain {
        std::string status = "reload failed";
        ~ReadyAgain() { notify_service_manager("READY=1\nSTATUS=" + status); }
    } ready_again;
    ServerOptions next;
    CommandLineResult parsed;
    std::string complaints = capture_stderr([&] { parsed = parse_command_line(argc, argv, next); });
    if (!parsed.run) {
        std::string first;
        for (size_t at = 0; at < complaints.size();) {
            size_t end = complaints.find('\n', at);
            if (end == std::string::npos) end = complaints.size();
            std::string line = complaints.substr(at, end - at);
            at = end + 1;
            if (line.starts_with("lepus: ")) line.erase(0, 7);
            if (line.empty()) continue;
            log_error("SIGHUP: %s", line.c_str());
            if (first.empty()) first = line;
        }
        log_error("SIGHUP: the configuration is invalid; keeping the running one");
        ready_again.status = "reload failed: " + (first.empty() ? "invalid configuration" : first);
        return;
    }
    // The warnings of an accepted config (a certificate that expired, issue 33)
    // go to the error log, as at start they go to stderr.
    for (size_t at = 0; at < complaints.size();) {
        size_t end = complaints.find('\n', at);
        if (end == std::string::npos) end = complaints.size();
        std::string_view line = std::string_view(complaints).substr(at, end - at);
        at = end + 1;
        if (line.starts_with("lepus: warning: ")) line.remove_prefix(16);
        if (!line.empty()) log_warn("SIGHUP: %.*s", int(line.size()), line.data());
    }
    std::string error;
    auto refuse = [&] {
        log_error("SIGHUP: %s; keeping the running configuration", error.c_str());
        ready_again.status = "reload failed: " + error;
    };
    // Certificates first: a renewed one that does not load (or match its
    // key) refuses the whole reload, and the running one stays.
    SslContextRef tls;
    std::shared_ptr<const QuicCredentials> quic_credentials;
    if (uses_tls(next)) {
        tls = build_tls_context(tls_settings(next), error);
        if (!tls) return refuse();
        // QUIC's copy of the same files (GnuTLS), swapped with TCP's below.
        if (listening.quic_tls) {
            quic_credentials = listening.quic_tls->read_credentials(tls_settings(next), error);
            if (!quic_credentials) return refuse();
        }
    }
    ListenChange listen;
    if (!listen.open(next, listening, error)) return refuse();
    if (next.threads != current.threads || next.io != current.io ||
        next.access_log != current.access_log || next.error_log != current.error_log)
        log_warn("SIGHUP: threads, io and the global log changes take effect after a restart");
    // Listening sockets are kept across a reload, with the options they were opened with.
    if (next.backlog != current.backlog || next.defer_accept != current.defer_accept ||
        next.notsent_lowat != current.notsent_lowat)
        log_warn("SIGHUP: backlog, defer-accept and notsent-lowat changes apply to addresses "
                 "listened on from now; the others keep theirs until a restart");
    // The running global log is what a site naming the same path shares.
    next.access_log = current.access_log;
    std::shared_ptr<const SiteTable> sites;
    if (!next.sites.empty()) sites = std::make_shared<const SiteTable>(next.sites);
    std::vector<std::unique_ptr<ServingSet>> sets;
    // The sets copy what they need from `next` (the sites stay in the SiteTable).
    for (size_t i = 0; i < workers.size(); ++i) {
        auto set =
            make_serving_set(next, sites, site_logs, unsigned(i), unsigned(workers.size()), error);
        if (!set) return refuse();
        sets.push_back(std::move(set));
    }
    for (size_t i = 0; i < workers.size(); ++i)
        workers[i]->reload(std::move(sets[i]));
    // New connections get the new certificates; those in flight keep theirs.
    if (tls) TlsContextSlot::process().publish(std::move(tls));
    if (quic_credentials) listening.quic_tls->publish(std::move(quic_credentials));
    if (!listen.empty()) listen.apply(listening);
    site_logs.prune(); // the logs of sites gone in an earlier reload, once no request holds them
    log_info("SIGHUP: configuration reloaded (%zu sites)", next.sites.size());
    ready_again.status = "configuration reloaded (" + std::to_string(next.sites.size()) + " sites)";
    if (applied) *applied = std::move(next);
}

bool service_identity(const ServerOptions& options, uid_t& uid, gid_t& gid, std::string& error) {
    uid = geteuid();
    gid = getegid();
    if (!options.user.empty()) {
        const passwd* user = getpwnam(options.user.c_str());
        if (!user) {
            error = "no such user '" + options.user + "'";
            return false;
        }
        uid = user->pw_uid;
        gid = user->pw_gid;
    }
    if (!options.group.empty()) {
        const group* g = getgrnam(options.group.c_str());
        if (!g) {
            error = "no such group '" + options.group + "'";
            return false;
        }
        gid = g->gr_gid;
    }
    return true;
}

bool drop_privileges(const ServerOptions& options, std::string& error) {
    if (options.user.empty() && options.group.empty()) return true;
    if (geteuid() != 0) {
        error = "--user/--group need lepus to start as root";
        return false;
    }
    uid_t uid;
    gid_t gid;
    if (!service_identity(options, uid, gid, error)) return false;
    const passwd* user = options.user.empty() ? nullptr : getpwnam(options.user.c_str());
    bool ok = (user ? initgroups(user->pw_name, gid) : setgroups(0, nullptr)) == 0 &&
              setgid(gid) == 0 && setuid(uid) == 0;
    if (!ok) {
        error = std::string("cannot drop privileges: ") + strerror(errno);
        return false;
    }
    // Issue 33: root was not told whom to run as; nginx's workers would not
    // stay root either.
    if (options.user_defaulted)
        std::fprintf(stderr,
                     "lepus: started as root: running as %s (--user to choose, --allow-root to "
                     "stay root)\n",
                     options.user.c_str());
    log_info("running as uid %u gid %u%s", unsigned(uid), unsigned(gid),
             options.user_defaulted ? " (started as root without --user)" : "");
    return true;
}

} // namespace lepus
