// lepus: a fast HTTP server (HTTP/1.1, HTTP/2, TLS, PHP through FastCGI, a reverse proxy). `lepus
// [ROOT] [options]`; see --help.
#include "net/tls_memory.h"
#include "server/options.h"
#include "server/pid_file.h"
#include "server/server.h"

#include <cstdio>

int main(int argc, char** argv) {
    // Before anything uses OpenSSL: each connection's SSL in a slot of its size.
    lepus::install_tls_memory();
    lepus::ServerOptions options;
    lepus::CommandLineResult parsed = lepus::parse_command_line(argc, argv, options);
    if (!parsed.run) return parsed.exit_code;
    if (!options.signal.empty()) {
        if (options.pid_file.empty()) {
            std::fprintf(stderr, "lepus: -s needs --pid-file (or a --config that sets pid_file)\n");
            return 2;
        }
        return lepus::signal_running_server(options.pid_file, options.signal);
    }
    return lepus::run_server(options, argc, argv);
}
