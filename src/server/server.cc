#include "server/server.h"

#include "base/clock.h"
#include "http/file_cache.h"
#include "log/async_logger.h"
#include "log/error_log.h"
#include "net/acceptor.h"
#include "net/quic_endpoint.h"
#include "net/quic_tls.h"
#include "net/reactor.h"
#include "net/reuseport_listener.h"
#include "net/socket.h"
#include "net/tls_context.h"
#include "net/tls_listen_scheme.h"
#include "server/acme_options.h"
#include "server/pid_file.h"
#include "server/reload.h"
#include "server/sd_notify.h"
#include "server/site_table.h"
#include "server/worker.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <sched.h>
#include <string>
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

// The signals the main thread waits for; blocked in every thread.
sigset_t server_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGQUIT); // lepus -s quit, as nginx's graceful stop
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR2); // the ACME thread: a certificate was issued (issue 34)
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

// --io uring where the kernel allows it; otherwise one line, and epoll.
IoBackend usable_io(IoBackend wanted) {
    if (wanted != IoBackend::Uring) return wanted;
    std::string why;
    if (io_uring_usable(why)) return wanted;
    std::fprintf(stderr, "lepus: io_uring is not available (%s); using epoll\n", why.c_str());
    log_warn("io_uring is not available (%s); using epoll", why.c_str());
    return IoBackend::Epoll;
}

// --accept auto. The acceptor thread balances connections over the reactors
// by load, but each connection then costs a thread hop (a ring push, an
// eventfd wake-up, and a context switch whenever the acceptor shares a core
// with a reactor). It pays for itself only with a core of its own: when the
// process may run on more cores than it has reactors. Otherwise every reactor
// accepts for itself on its SO_REUSEPORT socket (docs/BENCHMARKS.md, issue 15:
// more new connections per core, pinned on one core and unpinned on two).
bool choose_in_reactor_accept(const ServerOptions& options, unsigned reactors,
                              std::string& reason) {
    AcceptMode mode = options.accept_mode;
    if (mode == AcceptMode::ReusePort) {
        reason = "in the reactors (SO_REUSEPORT), as --accept reuseport asks";
        return true;
    }
    if (mode == AcceptMode::Acceptor) {
        reason = "acceptor thread, as --accept acceptor asks";
        return false;
    }
    // A Unix socket cannot be bound once per reactor (options.cc refuses it with reuseport).
    if (std::any_of(options.listen.begin(), options.listen.end(),
                    [](const std::string& text) { return text.starts_with("unix:"); })) {
        reason = "acceptor thread (--accept auto: a unix: listener needs it)";
        return false;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    unsigned cores = sched_getaffinity(0, sizeof set, &set) == 0
                         ? unsigned(CPU_COUNT(&set))
                         : unsigned(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    std::string counts =
        std::to_string(reactors) + " reactor(s) on " + std::to_string(cores) + " core(s)";
    if (cores > reactors) {
        reason = "acceptor thread (--accept auto: " + counts + " leave it a core of its own)";
        return false;
    }
    reason = "in the reactors (SO_REUSEPORT; --accept auto: " + counts +
             " leave no core for an acceptor thread)";
    return true;
}

// At info, what an admin checks first after a start (nginx -T's gist): the config
// file, each listener and each site with where it sends requests.
void log_start_up_summary(const ServerOptions& options, const std::vector<std::string>& urls) {
    if (!log_enabled(LogLevel::Info)) return;
    log_info("config: %s", options.config_path.empty() ? "none (command-line options only)"
                                                       : options.config_path.c_str());
    for (const std::string& url : urls)
        log_info("listening on %s", url.c_str());
    if (options.sites.empty()) log_info("site: every host, root %s", options.root.c_str());
    for (const SiteConfig& site : options.sites) {
        std::string names;
        for (const std::string& name : site.server_names)
            names.append(names.empty() ? "" : " ").append(name);
        std::string backends;
        if (site.fastcgi)
            for (const std::string& address : site.fastcgi->addresses)
                backends.append(", FastCGI ").append(address);
        if (site.proxy)
            for (const std::string& address : site.proxy->addresses)
                backends.append(", proxy ").append(address);
        if (!site.tls.empty()) backends.append(", TLS");
        log_info("site %s%s (%s): root %s%s", names.c_str(), site.is_default ? " (default)" : "",
                 site.origin.c_str(), site.root.c_str(), backends.c_str());
    }
}

} // namespace

struct Server::State {
    State(const ServerOptions& options, int argc, char** argv)
        : options(options), argc(argc), argv(argv), latest(options) {}

    bool open_listeners(std::string& error);
    bool open_quic_listeners(std::string& error);
    bool load_tls(std::string& error);
    bool make_workers(std::string& error);
    bool make_acceptor(std::string& error);
    bool write_pid_file(std::string& error);
    bool start_acme(std::string& error);
    void start_threads();
    void wait_for_signals();
    void stop_threads();

    const ServerOptions& options;
    int argc;
    char** argv;
    Loggers logs;
    bool logs_started = false;
    bool pid_file_written = false;
    IoBackend io = IoBackend::Epoll;
    unsigned threads = 1;
    int64_t max_connections = 0;
    rlim_t fd_limit = 0;
    bool reuse_port = false;
    std::vector<UniqueFd> listeners;
    std::vector<bool> listener_tls;          // per entry of `listeners`
    std::vector<std::string> listener_texts; // per entry of `listeners`: its --listen
    // quic:// listeners: per address, one UDP socket per reactor; their TLS.
    std::vector<std::vector<UniqueFd>> quic_sockets;
    std::unique_ptr<QuicTlsContext> quic_tls;
    std::string accept_reason; // why this accept mode, for the start-up line
    std::vector<SocketAddress> bound;
    std::vector<std::string> urls; // what "serving ROOT on URL" names
    Listening listening;

    std::atomic<int64_t> live_total{0};
    std::unique_ptr<ReactorLoad[]> loads;
    // The limits' per-client state, shared by the workers (before them: they hold slots).
    std::unique_ptr<ClientTable> clients;
    std::vector<Worker*> worker_list; // what every worker's status page reads
    std::vector<std::unique_ptr<Worker>> workers;
    std::unique_ptr<ReusePortListeners> reuseport; // with in-reactor accept
    std::unique_ptr<Acceptor> acceptor;
    std::vector<std::thread> reactor_threads;
    std::thread acceptor_thread;
    std::atomic<unsigned> running{0};
    std::unique_ptr<acme::AcmeManager> acme; // with --domain or tls = "acme"
    // The options in force: those of the start, then of the last good reload
    // (an ACME certificate swaps the TLS context these describe).
    ServerOptions latest;
};

Server::Server(const ServerOptions& options, int argc, char** argv)
    : state_(std::make_unique<State>(options, argc, argv)) {}

Server::~Server() {
    // The threads have joined (run() returned) or never started: every line
    // appended so far is written.
    if (state_->logs_started) state_->logs.stop();
    if (state_->pid_file_written) remove_pid_file(state_->options.pid_file);
    // The Unix sockets served at the end, those a reload added included.
    for (const auto& [text, fd] : state_->listening.sockets)
        if (auto address = parse_listen(text)) remove_unix_listener(*address);
}

bool Server::start(std::string& error) {
    State& s = *state_;
    signal(SIGPIPE, SIG_IGN);
    sigset_t signals = server_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    s.fd_limit = raise_fd_limit();
    // The open-file caches may keep a quarter of the descriptors; the rest are
    // the connections', the backends' and the logs' (issue 32).
    FileCache::set_descriptor_budget(size_t(std::min<rlim_t>(s.fd_limit / 4, SIZE_MAX)));
    s.max_connections = s.options.max_connections
                            ? s.options.max_connections
                            : std::max<int64_t>(int64_t(s.fd_limit) - 128, 16);
    // Log files are opened now, as root, and given to the user lepus drops to
    // at the end of start(), so that it can reopen them on SIGUSR1.
    if (geteuid() == 0 && (!s.options.user.empty() || !s.options.group.empty())) {
        uid_t uid;
        gid_t gid;
        if (!service_identity(s.options, uid, gid, error)) return false;
        set_log_file_owner(uid, gid);
        // Issue 33: a file a rotation leaves that the user may not open
        // (`create 0644 root root`) is opened by a helper that keeps root
        // for that alone; forked now, before any thread.
        std::vector<std::string> paths;
        for (const std::string* path : {&s.options.error_log, &s.options.access_log})
            paths.push_back(*path);
        for (const SiteConfig& site : s.options.sites)
            if (site.access_log) paths.push_back(*site.access_log);
        if (!start_log_file_opener(paths, error)) return false;
    }
    if (!s.logs.start(s.options, error)) return false;
    s.logs_started = true;
    s.io = usable_io(s.options.io);
    unsigned cores = std::max(1u, unsigned(sysconf(_SC_NPROCESSORS_ONLN)));
    s.threads = s.options.threads ? s.options.threads : cores;
    s.reuse_port = choose_in_reactor_accept(s.options, s.threads, s.accept_reason);
    // Listeners first: a taken port is the most common start-up failure.
    // Privileges go after every socket is bound and every root opened.
    // The PID file too, so that root can write it in /run.
    return s.open_listeners(error) && s.open_quic_listeners(error) && s.load_tls(error) &&
           s.make_workers(error) && s.make_acceptor(error) && s.write_pid_file(error) &&
           drop_privileges(s.options, error) && s.start_acme(error);
}

bool Server::State::open_listeners(std::string& error) {
    for (const std::string& text : options.listen) {
        ListenScheme scheme = split_listen_scheme(text);
        ListenAddress address = *parse_listen(scheme.address);
        // One socket, or one per reactor; the port is this process's alone.
        std::vector<UniqueFd> fds = lepus::open_listeners(
            address, listen_options(options, reuse_port), reuse_port ? threads : 1u, error);
        if (fds.empty()) return false;
        bound.push_back(local_address(fds.front().get()));
        urls.push_back(address.unix_path.empty()
                           ? (scheme.tls ? "https://" : "http://") + bound.back().to_string() + "/"
                           : "unix:" + address.unix_path);
        if (scheme.h2c) urls.back() += " (h2c: HTTP/2 with prior knowledge only)";
        listening.sockets.emplace_back(text, fds.front().get());
        for (UniqueFd& fd : fds) {
            listeners.push_back(std::move(fd));
            listener_tls.push_back(scheme.tls);
            listener_texts.push_back(text);
        }
    }
    return true;
}

bool Server::State::open_quic_listeners(std::string& error) {
    for (const std::string& text : options.quic_listen) {
        std::optional<ListenAddress> address = parse_listen(split_listen_scheme(text).address);
        if (!address || !address->unix_path.empty()) {
            error = text + ": QUIC needs an IP address and port";
            return false;
        }
        std::vector<UniqueFd> fds =
            open_quic_sockets(address->address, address->dual_stack, threads, error);
        if (fds.empty()) return false;
        log_info("listening on %s (HTTP/3, UDP)", text.c_str());
        quic_sockets.push_back(std::move(fds));
    }
    return true;
}

// The certificates were checked when the options were parsed; they are read
// again here, so a file changed in between is caught as well.
bool Server::State::load_tls(std::string& error) {
    if (!options.quic_listen.empty()) {
        // Made once: the endpoints keep it; a reload (SIGHUP, ACME) swaps its certificates.
        if (!quic_tls) quic_tls = std::make_unique<QuicTlsContext>();
        if (!quic_tls->load(tls_settings(latest), error)) return false;
        listening.quic_tls = quic_tls.get();
    }
    if (!uses_tls(latest)) return true;
    SslContextRef context = build_tls_context(tls_settings(latest), error);
    if (!context) return false;
    TlsContextSlot::process().publish(std::move(context));
    return true;
}

bool Server::State::make_workers(std::string& error) {
    std::shared_ptr<const SiteTable> sites;
    if (!options.sites.empty()) sites = std::make_shared<const SiteTable>(options.sites);
    loads = std::make_unique<ReactorLoad[]>(threads);
    unsigned cores = std::max(1u, unsigned(sysconf(_SC_NPROCESSORS_ONLN)));
    clients = std::make_unique<ClientTable>(options.limit_memory);
    WorkerShared shared{options, *logs.access, worker_list, monotonic_ms(), clients.get()};
    for (unsigned i = 0; i < threads; ++i) {
        ReactorOptions reactor_options;
        reactor_options.index = i;
        reactor_options.cpu = options.pin_threads ? int(i % cores) : -1;
        reactor_options.max_fds = size_t(fd_limit);
        reactor_options.shutdown_timeout_ms = uint32_t(options.shutdown_timeout_ms);
        reactor_options.io = io;
        auto worker = std::make_unique<Worker>(shared, reactor_options, loads[i], live_total);
        // Sites, FastCGI script resolvers and backends, per-site logs.
        auto serving = make_serving_set(options, sites, logs.sites, i, threads, error);
        if (!serving || !worker->init(error)) return false;
        worker->reload(std::move(serving)); // taken, with its pools made, on the reactor thread
        worker_list.push_back(worker.get());
        workers.push_back(std::move(worker));
    }
    for (std::vector<UniqueFd>& fds : quic_sockets) {
        std::vector<QuicEndpoint*> siblings;
        for (size_t i = 0; i < workers.size(); ++i) {
            QuicEndpoint* endpoint = workers[i]->add_quic_endpoint(std::move(fds[i]), *quic_tls);
            if (!endpoint) {
                error = "cannot register a QUIC socket with its reactor";
                return false;
            }
            siblings.push_back(endpoint);
        }
        for (QuicEndpoint* endpoint : siblings)
            endpoint->set_siblings(siblings);
    }
    if (reuse_port) {
        std::vector<Reactor*> reactors;
        for (auto& worker : workers)
            reactors.push_back(&worker->reactor());
        reuseport = std::make_unique<ReusePortListeners>(reactors, live_total, max_connections);
        listening.reuseport = reuseport.get();
        // open_listeners() made `threads` sockets per address, one after another.
        for (size_t first = 0; first < listeners.size(); first += threads) {
            std::vector<UniqueFd> copies;
            for (size_t l = first; l < first + threads; ++l)
                copies.push_back(std::move(listeners[l]));
            reuseport->start(listener_texts[first], std::move(copies), listener_tls[first],
                             split_listen_scheme(listener_texts[first]).h2c);
        }
    }
    return true;
}

bool Server::State::make_acceptor(std::string& error) {
    if (reuse_port) return true;
    std::vector<Reactor*> reactors;
    for (auto& worker : workers)
        reactors.push_back(&worker->reactor());
    AcceptorOptions acceptor_options;
    acceptor_options.max_connections = max_connections;
    acceptor_options.io = io;
    std::vector<int> tls_fds, h2c_fds;
    for (size_t l = 0; l < listeners.size(); ++l) {
        if (listener_tls[l]) tls_fds.push_back(listeners[l].get());
        if (split_listen_scheme(listener_texts[l]).h2c) h2c_fds.push_back(listeners[l].get());
    }
    acceptor = std::make_unique<Acceptor>(
        std::move(listeners), std::move(tls_fds), std::move(h2c_fds), reactors,
        std::span<ReactorLoad>(loads.get(), threads), live_total, acceptor_options);
    listening.acceptor = acceptor.get();
    return acceptor->init(error);
}

bool Server::State::write_pid_file(std::string& error) {
    if (options.pid_file.empty()) return true;
    pid_file_written = lepus::write_pid_file(options.pid_file, error);
    return pid_file_written;
}

// After dropping privileges: the state folder and what the ACME thread
// writes there belong to the service user, who renews them later.
bool Server::State::start_acme(std::string& error) {
    acme.reset(); // after a reload that changed what is managed: the old thread first
    if (!uses_acme(latest)) return true;
    // The ACME thread only tells the main thread, which swaps the TLS context
    // as a reload does (a signal, because the main thread waits in sigtimedwait).
    acme = std::make_unique<acme::AcmeManager>(acme_options(latest),
                                               [] { ::kill(::getpid(), SIGUSR2); });
    if (!latest.acme_on_demand_ask.empty())
        set_unknown_name_hook(
            [](std::string_view name) { acme::OnDemandRequests::process().push(name); });
    if (acme->start(error)) return true;
    error = "--state-dir: " + error;
    return false;
}

int Server::run() {
    State& s = *state_;
    s.start_threads();
    for (const std::string& url : s.urls)
        std::printf("lepus: serving %s on %s\n", s.options.root.c_str(), url.c_str());
    std::fflush(stdout);
    log_info("lepus started: %u reactor threads (%s), %s, max %lld connections; accept: %s",
             s.threads, s.options.pin_threads ? "pinned to cores, --pin on" : "not pinned",
             io_backend_name(s.io), static_cast<long long>(s.max_connections),
             s.accept_reason.c_str());
    notify_service_manager("READY=1");
    log_start_up_summary(s.options, s.urls);
    if (!s.options.fastcgi.empty())
        log_info("FastCGI: %s for %zu extension(s), %u connections in all (%s), queue %u per "
                 "reactor",
                 s.options.fastcgi.c_str(), s.options.fastcgi_ext.size(),
                 std::max(s.options.fastcgi_pool, s.threads),
                 s.options.fastcgi_keepalive ? "kept alive" : "one per request",
                 s.options.fastcgi_queue);
    if (uses_tls(s.options)) {
        const char* ktls = "off (--ktls off)";
        if (s.options.ktls)
            ktls = kernel_offers_ktls() ? "on: the kernel encrypts, files go by SSL_sendfile"
                                        : "off: this kernel has no tls module";
        log_info("TLS: kTLS %s", ktls);
    }
    if (!s.options.proxy.address.empty())
        log_info("proxy: %s after the files, %u connections in all, queue %u per reactor",
                 s.options.proxy.address.c_str(), std::max(s.options.proxy.pool, s.threads),
                 s.options.proxy.queue);
    s.wait_for_signals();
    s.stop_threads();
    log_info("lepus stopped");
    return 0;
}

void Server::State::start_threads() {
    running = threads;
    for (auto& worker : workers)
        reactor_threads.emplace_back([this, reactor = &worker->reactor()] {
            reactor->run();
            running.fetch_sub(1);
        });
    if (acceptor) acceptor_thread = std::thread([this] { acceptor->run(); });
}

void Server::State::wait_for_signals() {
    sigset_t signals = server_signals();
    bool stopping = false;
    // With TLS (from the start or since a reload) the loop also wakes once a
    // minute to rotate the ticket keys.
    TicketKeyring& tickets = TicketKeyring::process();
    for (;;) {
        timespec tick{0, 100L * 1000 * 1000};
        timespec minute{60, 0};
        timespec* timeout = stopping ? &tick : tickets.active() ? &minute : nullptr;
        int signal_number = sigtimedwait(&signals, nullptr, timeout);
        if (tickets.active() && tickets.rotate_if_due(monotonic_ms()))
            log_info("TLS session ticket keys rotated");
        if (stopping && running.load() == 0) return;
        if (signal_number == SIGUSR1) {
            logs.reopen();
            std::string counts;
            for (unsigned i = 0; i < threads; ++i)
                counts += (i ? " " : "") + std::to_string(loads[i].live_connections.load());
            log_info("SIGUSR1: logs reopened; connections per reactor: %s", counts.c_str());
        } else if (signal_number == SIGUSR2 && !stopping && uses_tls(latest)) {
            // New connections get the certificates now stored; those in flight keep theirs.
            std::string error;
            if (load_tls(error))
                log_info("TLS: certificates read again (a new ACME certificate)");
            else
                log_error("TLS: the new certificates do not load (%s); keeping the running ones",
                          error.c_str());
        } else if (signal_number == SIGHUP && !stopping) {
            std::optional<ServerOptions> applied;
            reload(argc, argv, options, worker_list, logs.sites, listening, &applied);
            if (applied) {
                bool acme_changed = acme_options(*applied) != acme_options(latest);
                latest = std::move(*applied);
                std::string error;
                if (acme_changed && !start_acme(error))
                    log_error("SIGHUP: ACME not restarted: %s", error.c_str());
            }
        } else if (signal_number == SIGTERM || signal_number == SIGINT ||
                   signal_number == SIGQUIT) {
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
                for (auto& worker : workers)
                    worker->reactor().request_stop();
            }
        }
    }
}

void Server::State::stop_threads() {
    acme.reset(); // an order in flight is abandoned
    if (acceptor_thread.joinable()) acceptor_thread.join();
    for (auto& thread : reactor_threads)
        thread.join();
    reuseport.reset();
}

int run_server(const ServerOptions& options, int argc, char** argv) {
    Server server(options, argc, argv);
    std::string error;
    if (!server.start(error)) {
        std::fprintf(stderr, "lepus: %s\n", error.c_str());
        return 1;
    }
    return server.run();
}

} // namespace lepus
