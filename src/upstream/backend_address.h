// BackendAddress: where a backend (php-fpm, an HTTP server) listens, "unix:/path" or "HOST:PORT",
// parsed once at start-up into a sockaddr ready for connect().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <sys/un.h>

namespace lepus::upstream {

struct BackendAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;
    std::string text; // as given, for log lines

    int family() const { return storage.ss_family; }
};

// Parses "unix:/abs/or/rel/path" or "IPV4:PORT" / "[IPV6]:PORT" (port 1..65535).
// nullopt on anything else, including a unix path too long for sun_path.
std::optional<BackendAddress> parse_backend_address(std::string_view text);

// Why connect() to `address` failed, for the error log: strerror(error), and for a
// unix socket this process may not write to (EACCES) what to change: the group to
// add the user lepus runs as to, or php-fpm's listen.mode (issue 33).
std::string describe_connect_error(const BackendAddress& address, int error);

} // namespace lepus::upstream
