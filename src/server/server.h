// Server: builds the threads and queues from ServerOptions and runs them until
// a signal stops it.
//
// Threads: the main thread waits for signals (SIGTERM/SIGINT/SIGQUIT stop, SIGUSR1
// reopens the logs, SIGHUP reloads the configuration); one acceptor thread
// (unless --accept reuseport); one reactor thread per --threads, pinned to a
// core each with --pin on; one back-end thread per log file.
#pragma once

#include "server/options.h"

#include <memory>
#include <string>

namespace lepus {

class Server {
public:
    // argc/argv are parsed again on SIGHUP to reload the configuration.
    Server(const ServerOptions& options, int argc, char** argv);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Opens the logs and the listening sockets, makes the workers and the
    // acceptor, drops privileges. False with one line in `error` when lepus
    // cannot start (a taken port, a missing root, an unwritable log).
    bool start(std::string& error);
    // Runs the threads until SIGTERM/SIGINT and every connection has closed
    // (or the grace period ended); handles SIGUSR1 and SIGHUP meanwhile.
    // Returns the exit code.
    int run();

private:
    struct State;
    std::unique_ptr<State> state_;
};

// Runs the server; returns the process exit code (0 after a clean stop,
// 1 when it cannot start, e.g. the port is taken).
int run_server(const ServerOptions& options, int argc, char** argv);

} // namespace lepus
