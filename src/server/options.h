// ServerOptions: every setting of the server, in one place, with the command
// line that fills it. The config file (later) fills the same struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lepus {

enum class AcceptMode { Acceptor, ReusePort };

struct ServerOptions {
    std::string root = ".";
    std::vector<std::string> listen = {"0.0.0.0:8080"};
    unsigned threads = 0; // 0: one reactor per online core
    bool pin_threads = true;
    AcceptMode accept_mode = AcceptMode::Acceptor;
    int backlog = 4096;
    int64_t max_connections = 0; // 0: derived from RLIMIT_NOFILE

    std::string access_log = "-";
    std::string error_log = "-";
    std::string log_level = "warn";

    uint64_t keepalive_timeout_ms = 75000;
    uint64_t keepalive_requests = 1000;
    uint64_t header_timeout_ms = 10000;
    uint64_t body_timeout_ms = 60000;
    uint64_t send_timeout_ms = 60000;
    uint64_t shutdown_timeout_ms = 10000;
    uint64_t max_body_size = 1 << 20;

    std::vector<std::string> index = {"index.html"};
    bool autoindex = false;
    bool dotfiles_allow = false;

    // FastCGI (php-fpm). Empty fastcgi: off, everything is static.
    std::string fastcgi;                             // "unix:/path" or "HOST:PORT"
    std::vector<std::string> fastcgi_ext = {".php"}; // paths with these go to php-fpm
    unsigned fastcgi_pool = 8;                       // backend connections, summed over reactors
    unsigned fastcgi_queue = 64; // requests waiting for a connection, per reactor
    uint64_t fastcgi_queue_timeout_ms = 10000;
    uint64_t fastcgi_timeout_ms = 60000;
    uint64_t fastcgi_idle_timeout_ms = 30000;
};

// What parse_command_line decided.
struct CommandLineResult {
    bool run = false; // false: exit with exit_code (help, version, or an error already printed)
    int exit_code = 0;
};

// Parses and validates argv into `options`. Errors are printed as one line on
// stderr ("lepus: ...") with exit code 2; --help and --version print and exit 0.
CommandLineResult parse_command_line(int argc, char** argv, ServerOptions& options);

} // namespace lepus
