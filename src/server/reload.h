// What the server does on SIGHUP, and at start-up after binding: the
// listening sockets it serves (so that a reload knows which to open and which
// to close), reloading the configuration, and dropping privileges.
#pragma once

#include "net/acceptor.h"
#include "net/reuseport_listener.h"
#include "server/options.h"
#include "server/serving_set.h"

#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace lepus {

class QuicTlsContext;
class Worker;

// The listening sockets the acceptor thread (or the reactors) serve, by the
// address they were configured with.
struct Listening {
    Acceptor* acceptor = nullptr;            // with the acceptor thread
    ReusePortListeners* reuseport = nullptr; // with in-reactor accept
    // By --listen text: the socket (the first reactor's, in-reactor).
    std::vector<std::pair<std::string, int>> sockets;
    // The certificates of the quic:// listeners (null without one): a reload
    // gives them the TCP listeners' new certificates.
    QuicTlsContext* quic_tls = nullptr;
};

// SIGHUP: reads the command line and config file again. When they are valid,
// every worker gets new handlers for its next requests (responses in flight
// finish with the old ones): sites, roots, indexes, error pages, per-site
// access logs (started here) and FastCGI backends (a worker keeps the warm pool
// of a backend whose settings did not change); the acceptor opens the new
// listen addresses and closes the dropped ones; new TLS connections get the
// certificates and keys read again (those in flight keep theirs). When they are not valid, the
// errors are logged and nothing changes. Threads, the event engine, the global
// logs and the client timeouts need a restart. `applied`, when given, gets the
// options now in force (the ACME thread's certificates follow them).
void reload(int argc, char** argv, const ServerOptions& current,
            const std::vector<Worker*>& workers, SiteLogs& site_logs, Listening& listening,
            std::optional<ServerOptions>* applied = nullptr);

// The uid and gid lepus runs as once --user/--group apply (the current ones
// when neither is given). False with one line in `error` for an unknown name.
bool service_identity(const ServerOptions& options, uid_t& uid, gid_t& gid, std::string& error);

// --user/--group: switches to them (group first, with its supplementary
// groups). False with one line in `error` when it cannot.
bool drop_privileges(const ServerOptions& options, std::string& error);

} // namespace lepus
