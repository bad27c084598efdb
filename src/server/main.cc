// lepus: a fast HTTP/1.1 server. `lepus [ROOT] [options]`; see --help.
#include "server/options.h"
#include "server/server.h"

int main(int argc, char** argv) {
    lepus::ServerOptions options;
    lepus::CommandLineResult parsed = lepus::parse_command_line(argc, argv, options);
    if (!parsed.run) return parsed.exit_code;
    return lepus::run_server(options, argc, argv);
}
