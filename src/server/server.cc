#include "server/server.h"

#include "base/clock.h"
#include "log/async_logger.h"
#include "log/error_log.h"
#include "net/acceptor.h"
#include "net/reactor.h"
#include "net/socket.h"
#include "server/http_connection.h"
#include "server/sd_notify.h"
#include "server/site_table.h"
#include "server/worker.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <grp.h>
#include <memory>
#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

// lepus needs one fd per connection; raise the soft limit to the hard one.
rlim_t raise_fd_limit() {
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
        getrlimit(RLIMIT_NOFILE, &limit);
    }
    return limit.rlim_cur;
}

void accept_into_worker(Reactor& reactor, const AcceptedSocket& socket, void* context) {
    HttpConnection::open(*static_cast<Worker*>(context), socket);
}

// --accept reuseport: each reactor owns a SO_REUSEPORT listener and accepts
// for itself; the kernel spreads connections by hash. Exists so the bench can
// measure it against the acceptor thread.
class ReusePortListener final : public EventHandler {
public:
    ReusePortListener(Worker& worker, UniqueFd fd, std::atomic<int64_t>& live_total)
        : worker_(worker), fd_(std::move(fd)), live_total_(live_total) {}
    int fd() const { return fd_.get(); }

    void on_events(uint32_t) override {
        for (;;) {
            AcceptedSocket socket;
            socket.peer.length = sizeof socket.peer.storage;
            socket.fd = accept4(fd_.get(), &socket.peer.storage.any, &socket.peer.length,
                                SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (socket.fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                // On EMFILE the backlog waits for the next edge; nothing spins.
                if (errno != EAGAIN) log_error("accept: %s", strerror(errno));
                return;
            }
            live_total_.fetch_add(1, std::memory_order_relaxed);
            HttpConnection::open(worker_, socket);
        }
    }
    void on_shutdown() override {}
    void on_force_close() override {}

private:
    Worker& worker_;
    UniqueFd fd_;
    std::atomic<int64_t>& live_total_;
};

// The listening sockets the acceptor thread serves, by the address they were
// configured with, so that a reload can tell which to open and which to close.
struct Listening {
    Acceptor* acceptor = nullptr; // null with --accept reuseport
    std::vector<std::pair<std::string, int>> sockets;
};

// What a reload changes in the listening sockets: the new ones are opened (and
// bound) before anything else changes, so a taken port refuses the reload.
struct ListenChange {
    std::vector<std::pair<std::string, UniqueFd>> opened;
    std::vector<std::string> closed;
    bool open(const ServerOptions& next, const Listening& listening, std::string& error) {
        auto listed = [](const auto& list, const std::string& text) {
            return std::any_of(list.begin(), list.end(),
                               [&](const auto& item) { return item.first == text; });
        };
        for (const std::string& text : next.listen) {
            if (listed(listening.sockets, text) || listed(opened, text)) continue;
            UniqueFd fd = open_listener(*parse_listen_address(text), {next.backlog, false}, error);
            if (!fd) return false;
            opened.emplace_back(text, std::move(fd));
        }
        for (const auto& [text, fd] : listening.sockets)
            if (std::find(next.listen.begin(), next.listen.end(), text) == next.listen.end())
                closed.push_back(text);
        return true;
    }
    bool empty() const { return opened.empty() && closed.empty(); }
    // Hands the new sockets to the acceptor and has it close the old ones.
    void apply(Listening& listening) {
        std::vector<UniqueFd> added;
        std::vector<int> removed;
        for (auto& [text, fd] : opened) {
            log_info("SIGHUP: listening on %s", text.c_str());
            listening.sockets.emplace_back(text, fd.get());
            added.push_back(std::move(fd));
        }
        for (const std::string& text : closed) {
            log_info("SIGHUP: no longer listening on %s", text.c_str());
            auto it = std::find_if(listening.sockets.begin(), listening.sockets.end(),
                                   [&](const auto& item) { return item.first == text; });
            removed.push_back(it->second);
            listening.sockets.erase(it);
        }
        listening.acceptor->change_listeners(std::move(added), std::move(removed));
    }
};

// SIGHUP: reads the command line and config file again. When they are valid,
// every worker gets new handlers for its next requests (responses in flight
// finish with the old ones): sites, roots, indexes, error pages, per-site
// access logs (started here) and FastCGI backends (a worker keeps the warm pool
// of a backend whose settings did not change); the acceptor opens the new
// listen addresses and closes the dropped ones. When they are not valid, the
// errors are logged and nothing changes. Threads, the event engine, the global
// logs and the client timeouts need a restart.
void reload(int argc, char** argv, const ServerOptions& current, std::vector<Worker*>& workers,
            SiteLogs& site_logs, Listening& listening) {
    ServerOptions next;
    CommandLineResult parsed = parse_command_line(argc, argv, next);
    if (!parsed.run) {
        log_error("SIGHUP: the configuration is invalid (see stderr); keeping the running one");
        return;
    }
    notify_service_manager("RELOADING=1");
    // READY=1 again however the reload ends: lepus keeps serving either way.
    struct ReadyAgain {
        ~ReadyAgain() { notify_service_manager("READY=1"); }
    } ready_again;
    ListenChange listen;
    std::string error;
    if (!listening.acceptor) {
        if (next.listen != current.listen)
            log_warn("SIGHUP: listen changes take effect after a restart with --accept reuseport");
    } else if (!listen.open(next, listening, error)) {
        log_error("SIGHUP: %s; keeping the running configuration", error.c_str());
        return;
    }
    if (next.threads != current.threads || next.io != current.io ||
        next.access_log != current.access_log || next.error_log != current.error_log)
        log_warn("SIGHUP: threads, io and the global log changes take effect after a restart");
    // The running global log is what a site naming the same path shares.
    next.access_log = current.access_log;
    std::shared_ptr<const SiteTable> sites;
    if (!next.sites.empty()) sites = std::make_shared<const SiteTable>(next.sites);
    std::vector<std::unique_ptr<ServingSet>> sets;
    // The sets copy what they need from `next` (the sites stay in the SiteTable).
    for (size_t i = 0; i < workers.size(); ++i) {
        auto set =
            make_serving_set(next, sites, site_logs, unsigned(i), unsigned(workers.size()), error);
        if (!set) {
            log_error("SIGHUP: %s; keeping the running configuration", error.c_str());
            return;
        }
        sets.push_back(std::move(set));
    }
    for (size_t i = 0; i < workers.size(); ++i)
        workers[i]->reload(std::move(sets[i]));
    if (!listen.empty()) listen.apply(listening);
    site_logs.prune(); // the logs of sites gone in an earlier reload, once no request holds them
    log_info("SIGHUP: configuration reloaded (%zu sites)", next.sites.size());
}

// --user/--group: switch to them (group first, with its supplementary groups).
bool drop_privileges(const ServerOptions& options, std::string& error) {
    if (options.user.empty() && options.group.empty()) return true;
    if (geteuid() != 0) {
        error = "--user/--group need lepus to start as root";
        return false;
    }
    gid_t gid = getegid();
    uid_t uid = geteuid();
    const passwd* user = nullptr;
    if (!options.user.empty()) {
        user = getpwnam(options.user.c_str());
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
    bool ok = (user ? initgroups(user->pw_name, gid) : setgroups(0, nullptr)) == 0 &&
              setgid(gid) == 0 && setuid(uid) == 0;
    if (!ok) {
        error = std::string("cannot drop privileges: ") + strerror(errno);
        return false;
    }
    log_info("running as uid %u gid %u", unsigned(uid), unsigned(gid));
    return true;
}

// The signals the main thread waits for; blocked in every thread.
sigset_t server_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    return set;
}

struct Loggers {
    std::unique_ptr<AsyncLogger> error, access;
    SiteLogs sites; // per-site access logs

    bool start(const ServerOptions& options, std::string& error_text) {
        error = std::make_unique<AsyncLogger>(AsyncLoggerOptions{.path = options.error_log});
        access = std::make_unique<AsyncLogger>(AsyncLoggerOptions{.path = options.access_log});
        std::string why;
        if (!error->start(why)) {
            error_text = "error log: " + why;
            return false;
        }
        if (!access->start(why)) {
            error_text = "access log: " + why;
            return false;
        }
        set_error_log(error.get(), *parse_log_level(options.log_level));
        return true;
    }
    void reopen() {
        error->reopen();
        access->reopen();
        sites.reopen();
        sites.prune();
    }
    // Once the reactors have stopped: every line appended is written.
    void stop() {
        set_error_log(nullptr, LogLevel::Error);
        sites.stop();
        access->stop();
        error->stop();
    }
};

} // namespace

int run_server(const ServerOptions& options, int argc, char** argv) {
    signal(SIGPIPE, SIG_IGN);
    sigset_t signals = server_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    rlim_t fd_limit = raise_fd_limit();
    int64_t max_connections = options.max_connections
                                  ? options.max_connections
                                  : std::max<int64_t>(int64_t(fd_limit) - 128, 16);

    Loggers logs;
    std::string error;
    if (!logs.start(options, error)) {
        std::fprintf(stderr, "lepus: %s\n", error.c_str());
        return 1;
    }

    // --io uring where the kernel allows it; otherwise one line, and epoll.
    IoBackend io = options.io;
    if (io == IoBackend::Uring) {
        std::string why;
        if (!io_uring_usable(why)) {
            std::fprintf(stderr, "lepus: io_uring is not available (%s); using epoll\n",
                         why.c_str());
            log_warn("io_uring is not available (%s); using epoll", why.c_str());
            io = IoBackend::Epoll;
        }
    }

    // Listeners first: a taken port is the most common start-up failure.
    unsigned threads =
        options.threads ? options.threads : std::max(1u, unsigned(sysconf(_SC_NPROCESSORS_ONLN)));
    bool reuse_port = options.accept_mode == AcceptMode::ReusePort;
    std::vector<UniqueFd> listeners;
    std::vector<SocketAddress> bound;
    Listening listening;
    for (const std::string& text : options.listen) {
        SocketAddress address = *parse_listen_address(text);
        for (unsigned copy = 0; copy < (reuse_port ? threads : 1u); ++copy) {
            if (copy > 0) address = bound.back(); // same port even when it was 0
            UniqueFd fd = open_listener(address, {options.backlog, reuse_port}, error);
            if (!fd) {
                std::fprintf(stderr, "lepus: %s\n", error.c_str());
                logs.stop();
                return 1;
            }
            if (copy == 0) bound.push_back(local_address(fd.get()));
            if (!reuse_port) listening.sockets.emplace_back(text, fd.get());
            listeners.push_back(std::move(fd));
        }
    }

    std::shared_ptr<const SiteTable> sites;
    if (!options.sites.empty()) sites = std::make_shared<const SiteTable>(options.sites);
    std::vector<Worker*> worker_list;

    std::atomic<int64_t> live_total{0};
    auto loads = std::make_unique<ReactorLoad[]>(threads);
    std::vector<std::unique_ptr<Worker>> workers;
    std::vector<std::unique_ptr<Reactor>> reactors;
    std::vector<Reactor*> reactor_pointers;
    std::vector<std::unique_ptr<ReusePortListener>> own_listeners;
    unsigned cores = std::max(1u, unsigned(sysconf(_SC_NPROCESSORS_ONLN)));
    for (unsigned i = 0; i < threads; ++i) {
        auto worker = std::make_unique<Worker>(options, *logs.access);
        // Sites, FastCGI script resolvers and backends, per-site logs.
        auto serving = make_serving_set(options, sites, logs.sites, i, threads, error);
        if (!serving) {
            std::fprintf(stderr, "lepus: %s\n", error.c_str());
            logs.stop();
            return 1;
        }
        worker->reload(std::move(serving)); // taken, with its pools made, on the reactor thread
        worker->all_workers = &worker_list;
        worker->started_ms = monotonic_ms();
        worker_list.push_back(worker.get());
        ReactorOptions reactor_options;
        reactor_options.index = i;
        reactor_options.cpu = options.pin_threads ? int(i % cores) : -1;
        reactor_options.max_fds = size_t(fd_limit);
        reactor_options.shutdown_timeout_ms = uint32_t(options.shutdown_timeout_ms);
        reactor_options.io = io;
        auto reactor = std::make_unique<Reactor>(reactor_options, loads[i], live_total,
                                                 &accept_into_worker, worker.get());
        if (!reactor->init(error)) {
            std::fprintf(stderr, "lepus: %s\n", error.c_str());
            logs.stop();
            return 1;
        }
        worker->reactor = reactor.get();
        if (reuse_port) {
            for (size_t l = i; l < listeners.size(); l += threads) {
                auto listener = std::make_unique<ReusePortListener>(
                    *worker, std::move(listeners[l]), live_total);
                reactor->add(listener->fd(), listener.get(), EPOLLIN, false);
                own_listeners.push_back(std::move(listener));
            }
        }
        reactor_pointers.push_back(reactor.get());
        reactors.push_back(std::move(reactor));
        workers.push_back(std::move(worker));
    }

    std::unique_ptr<Acceptor> acceptor;
    if (!reuse_port) {
        AcceptorOptions acceptor_options;
        acceptor_options.max_connections = max_connections;
        acceptor_options.io = io;
        acceptor = std::make_unique<Acceptor>(std::move(listeners), reactor_pointers,
                                              std::span<ReactorLoad>(loads.get(), threads),
                                              live_total, acceptor_options);
        if (!acceptor->init(error)) {
            std::fprintf(stderr, "lepus: %s\n", error.c_str());
            logs.stop();
            return 1;
        }
    }

    // Privileges go after every socket is bound and every root opened.
    if (!drop_privileges(options, error)) {
        std::fprintf(stderr, "lepus: %s\n", error.c_str());
        logs.stop();
        return 1;
    }

    std::atomic<unsigned> running{threads};
    std::vector<std::thread> reactor_threads;
    for (auto& reactor : reactors)
        reactor_threads.emplace_back([&reactor, &running] {
            reactor->run();
            running.fetch_sub(1);
        });
    std::thread acceptor_thread;
    if (acceptor) acceptor_thread = std::thread([&] { acceptor->run(); });

    for (const SocketAddress& address : bound)
        std::printf("lepus: serving %s on http://%s/\n", options.root.c_str(),
                    address.to_string().c_str());
    std::fflush(stdout);
    log_info("lepus started: %u reactor threads, %s accept, %s, max %lld connections", threads,
             reuse_port ? "reuseport" : "acceptor-thread", io_backend_name(io),
             static_cast<long long>(max_connections));
    notify_service_manager("READY=1");
    if (!options.fastcgi.empty())
        log_info("FastCGI: %s for %zu extension(s), %u connections in all, queue %u per reactor",
                 options.fastcgi.c_str(), options.fastcgi_ext.size(),
                 std::max(options.fastcgi_pool, threads), options.fastcgi_queue);

    bool stopping = false;
    for (;;) {
        timespec tick{0, 100 * 1000 * 1000};
        int signal_number = sigtimedwait(&signals, nullptr, stopping ? &tick : nullptr);
        if (stopping && running.load() == 0) break;
        if (signal_number == SIGUSR1) {
            logs.reopen();
            std::string counts;
            for (unsigned i = 0; i < threads; ++i)
                counts += (i ? " " : "") + std::to_string(loads[i].live_connections.load());
            log_info("SIGUSR1: logs reopened; connections per reactor: %s", counts.c_str());
        } else if (signal_number == SIGHUP && !stopping) {
            listening.acceptor = acceptor.get();
            reload(argc, argv, options, worker_list, logs.sites, listening);
        } else if (signal_number == SIGTERM || signal_number == SIGINT) {
            if (stopping && signal_number == SIGINT) {
                // A second Ctrl-C: leave now, keeping what the logs hold.
                log_warn("second SIGINT: exiting without waiting for connections");
                logs.stop();
                _exit(1);
            }
            if (!stopping) {
                log_info("signal %d: stopping (grace period %llu ms)", signal_number,
                         static_cast<unsigned long long>(options.shutdown_timeout_ms));
                stopping = true;
                notify_service_manager("STOPPING=1");
                if (acceptor) acceptor->request_stop();
                for (auto& reactor : reactors)
                    reactor->request_stop();
            }
        }
    }
    if (acceptor_thread.joinable()) acceptor_thread.join();
    for (auto& thread : reactor_threads)
        thread.join();
    own_listeners.clear();
    log_info("lepus stopped");
    logs.stop();
    return 0;
}

} // namespace lepus
