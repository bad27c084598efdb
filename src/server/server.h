// Server: builds the threads and queues from ServerOptions and runs them until
// a signal stops it.
//
// Threads: the main thread waits for signals (SIGTERM/SIGINT stop, SIGUSR1
// reopens the logs, SIGHUP reloads the configuration); one acceptor thread (unless --accept
// reuseport); one reactor thread per --threads, pinned to a core each; one back-end thread per log
// file.
#pragma once

#include "server/options.h"

namespace lepus {

// Runs the server; returns the process exit code (0 after a clean stop,
// 1 when it cannot start, e.g. the port is taken). argc/argv are parsed again
// on SIGHUP to reload the configuration.
int run_server(const ServerOptions& options, int argc, char** argv);

} // namespace lepus
