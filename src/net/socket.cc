#include "net/socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace lepus {

uint16_t SocketAddress::port() const {
    return ntohs(storage.any.sa_family == AF_INET6 ? storage.v6.sin6_port : storage.v4.sin_port);
}

void SocketAddress::format_host(std::string& out) const {
    if (storage.any.sa_family == AF_UNIX) {
        out.assign("unix:");
        return;
    }
    if (storage.any.sa_family == AF_INET) {
        // glibc's inet_ntop formats IPv4 with sprintf, which cost about 1,500
        // instructions per access-log line; the digits are written directly.
        const auto* bytes = reinterpret_cast<const unsigned char*>(&storage.v4.sin_addr);
        char text[16];
        char* p = text;
        for (int i = 0; i < 4; ++i) {
            unsigned value = bytes[i];
            if (value >= 100) *p++ = char('0' + value / 100);
            if (value >= 10) *p++ = char('0' + value / 10 % 10);
            *p++ = char('0' + value % 10);
            if (i < 3) *p++ = '.';
        }
        out.assign(text, size_t(p - text));
        return;
    }
    char text[INET6_ADDRSTRLEN];
    const void* raw = storage.any.sa_family == AF_INET6
                          ? static_cast<const void*>(&storage.v6.sin6_addr)
                          : static_cast<const void*>(&storage.v4.sin_addr);
    out.clear();
    if (inet_ntop(storage.any.sa_family, raw, text, sizeof text)) out = text;
}

std::string SocketAddress::to_string() const {
    std::string host;
    format_host(host);
    if (storage.any.sa_family == AF_UNIX) return host;
    if (storage.any.sa_family == AF_INET6) host = "[" + host + "]";
    return host + ":" + std::to_string(port());
}

std::optional<SocketAddress> parse_listen_address(std::string_view text) {
    std::string_view host;
    std::string_view port_text = text;
    bool v6 = false;
    if (!text.empty() && text.front() == '[') {
        size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::nullopt;
        host = text.substr(1, close - 1);
        port_text = text.substr(close + 2);
        v6 = true;
    } else if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) return std::nullopt; // bare v6 needs []
    }
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        port > 65535)
        return std::nullopt;

    SocketAddress address;
    std::string host_copy(host);
    if (v6) {
        address.storage.v6.sin6_family = AF_INET6;
        address.storage.v6.sin6_port = htons(port);
        if (inet_pton(AF_INET6, host_copy.c_str(), &address.storage.v6.sin6_addr) != 1)
            return std::nullopt;
        address.length = sizeof(sockaddr_in6);
    } else {
        address.storage.v4.sin_family = AF_INET;
        address.storage.v4.sin_port = htons(port);
        if (host.empty() || host == "*")
            address.storage.v4.sin_addr.s_addr = htonl(INADDR_ANY);
        else if (host == "localhost")
            address.storage.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (inet_pton(AF_INET, host_copy.c_str(), &address.storage.v4.sin_addr) != 1)
            return std::nullopt;
        address.length = sizeof(sockaddr_in);
    }
    return address;
}

SocketAddress without_v4_mapping(const SocketAddress& address) {
    if (address.storage.any.sa_family != AF_INET6 ||
        !IN6_IS_ADDR_V4MAPPED(&address.storage.v6.sin6_addr))
        return address;
    SocketAddress v4;
    v4.storage.v4.sin_family = AF_INET;
    v4.storage.v4.sin_port = address.storage.v6.sin6_port;
    std::memcpy(&v4.storage.v4.sin_addr, &address.storage.v6.sin6_addr.s6_addr[12], 4);
    v4.length = sizeof(sockaddr_in);
    return v4;
}

std::optional<ListenAddress> parse_listen(std::string_view text) {
    ListenAddress listen;
    if (text.starts_with("unix:")) {
        listen.unix_path = std::string(text.substr(5));
        // sun_path holds 108 bytes with the NUL; a relative path would depend on the cwd.
        if (!listen.unix_path.starts_with("/") ||
            listen.unix_path.size() >= sizeof(sockaddr_un{}.sun_path) ||
            listen.unix_path.find('\0') != std::string::npos)
            return std::nullopt;
        return listen;
    }
    auto address = parse_listen_address(text);
    if (!address) return std::nullopt;
    listen.address = *address;
    size_t colon = text.rfind(':');
    std::string_view host = colon == std::string_view::npos ? "" : text.substr(0, colon);
    if (host.empty() || host == "*") {
        listen.dual_stack = true;
        listen.address.storage.v6 = {};
        listen.address.storage.v6.sin6_family = AF_INET6;
        listen.address.storage.v6.sin6_port = htons(address->port());
        listen.address.storage.v6.sin6_addr = in6addr_any;
        listen.address.length = sizeof(sockaddr_in6);
    }
    return listen;
}

namespace {

// When a listener gets SO_REUSEPORT. Linux lets a socket bind a port that
// others hold only when they all have SO_REUSEPORT and the same effective uid:
// so a second lepus of the same user, binding with it, would silently share
// the port (and split the traffic) with the first (issue 33).
enum class ReusePort {
    Never,
    // Bound without it, so that anyone holding the port (of any user, with
    // SO_REUSEPORT or not) fails the bind with EADDRINUSE; set after the bind,
    // before listen(), so that the copies below can join it. Linux reads the
    // flag of the sockets already there when a new one binds, and forms the
    // reuseport group at listen(), so the first socket is in the group too.
    AfterBind,
    // A copy of a socket bound AfterBind, to the same address.
    BeforeBind,
};

UniqueFd open_tcp_listener(const SocketAddress& address, const ListenOptions& options, bool v6_only,
                           ReusePort reuse_port, std::string& error) {
    UniqueFd fd(::socket(address.storage.any.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         IPPROTO_TCP));
    auto fail = [&](const char* what) {
        error = std::string("cannot ") + what + " " + address.to_string() + ": " + strerror(errno);
        return UniqueFd();
    };
    if (!fd) return fail("create a socket for");
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuse_port == ReusePort::BeforeBind &&
        setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return fail("set SO_REUSEPORT on");
    // Accepted sockets inherit TCP_NODELAY from their listener (Linux clones the
    // listener's socket for each child): one setsockopt here instead of one per
    // connection. Responses go out in one writev, so Nagle would only delay them.
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (options.defer_accept_s > 0)
        setsockopt(fd.get(), IPPROTO_TCP, TCP_DEFER_ACCEPT, &options.defer_accept_s,
                   sizeof options.defer_accept_s);
    // Inherited by accepted sockets as TCP_NODELAY is.
    if (options.notsent_lowat > 0)
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &options.notsent_lowat,
                   sizeof options.notsent_lowat);
    // [::]:80 serves IPv6 only, so that 0.0.0.0:80 can be listed beside it as in
    // nginx; a bare port serves both (set either way: the sysctl bindv6only varies).
    int v6_only_value = v6_only ? 1 : 0;
    if (address.storage.any.sa_family == AF_INET6)
        setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6_only_value, sizeof v6_only_value);
    if (::bind(fd.get(), &address.storage.any, address.length) != 0) {
        if (errno == EADDRINUSE) {
            error = "port " + std::to_string(address.port()) + " is already in use (" +
                    address.to_string() + ")";
            return {};
        }
        return fail("bind");
    }
    if (reuse_port == ReusePort::AfterBind &&
        setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return fail("set SO_REUSEPORT on");
    if (::listen(fd.get(), options.backlog) != 0) return fail("listen on");
    return fd;
}

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.data(), path.size()); // parse_listen checked the size
    return address;
}

// A socket file that refuses connections was left by a process that is gone.
bool stale_socket_file(const std::string& path, std::string& error) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return false; // nothing there (or nothing we may see)
    if (!S_ISSOCK(st.st_mode)) {
        error = "unix:" + path + " exists and is not a socket";
        return false;
    }
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address = unix_address(path);
    if (probe &&
        ::connect(probe.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
        error = "unix:" + path + " is already in use by a running server";
        return false;
    }
    return true;
}

UniqueFd open_unix_listener(const std::string& path, const ListenOptions& options,
                            std::string& error) {
    auto fail = [&](const char* what) {
        error = std::string("cannot ") + what + " unix:" + path + ": " + strerror(errno);
        return UniqueFd();
    };
    if (stale_socket_file(path, error)) ::unlink(path.c_str());
    if (!error.empty()) return {};
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return fail("create a socket for");
    sockaddr_un address = unix_address(path);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
        return fail("bind");
    // connect(2) needs write permission on the file: open to every local user,
    // as a port on 127.0.0.1 is (the proxy in front runs as its own user).
    if (::chmod(path.c_str(), 0666) != 0) return fail("chmod");
    if (::listen(fd.get(), options.backlog) != 0) return fail("listen on");
    return fd;
}

UniqueFd open_listener_as(const ListenAddress& listen, const ListenOptions& options,
                          ReusePort reuse_port, std::string& error) {
    if (!listen.unix_path.empty()) return open_unix_listener(listen.unix_path, options, error);
    if (!listen.dual_stack || listen.address.storage.any.sa_family != AF_INET6)
        return open_tcp_listener(listen.address, options, true, reuse_port, error);
    UniqueFd fd = open_tcp_listener(listen.address, options, false, reuse_port, error);
    // No IPv6 on this host (ipv6.disable=1, a container without it): IPv4 alone.
    if (fd || (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)) return fd;
    SocketAddress v4;
    v4.storage.v4.sin_family = AF_INET;
    v4.storage.v4.sin_port = listen.address.storage.v6.sin6_port;
    v4.storage.v4.sin_addr.s_addr = htonl(INADDR_ANY);
    v4.length = sizeof(sockaddr_in);
    error.clear();
    return open_tcp_listener(v4, options, true, reuse_port, error);
}

} // namespace

UniqueFd open_listener(const SocketAddress& address, const ListenOptions& options,
                       std::string& error) {
    return open_tcp_listener(address, options, true,
                             options.reuse_port ? ReusePort::AfterBind : ReusePort::Never, error);
}

UniqueFd open_listener(const ListenAddress& listen, const ListenOptions& options,
                       std::string& error) {
    return open_listener_as(listen, options,
                            options.reuse_port ? ReusePort::AfterBind : ReusePort::Never, error);
}

std::vector<UniqueFd> open_listeners(const ListenAddress& listen, const ListenOptions& options,
                                     size_t copies, std::string& error) {
    std::vector<UniqueFd> fds;
    UniqueFd first = open_listener(listen, options, error);
    if (!first) return {};
    ListenAddress copy = listen;
    // The port the first got, also when it was given port 0; and its family,
    // when a dual-stack address fell back to IPv4.
    copy.address = local_address(first.get());
    fds.push_back(std::move(first));
    while (fds.size() < copies) {
        UniqueFd fd = open_listener_as(copy, options, ReusePort::BeforeBind, error);
        if (!fd) return {};
        fds.push_back(std::move(fd));
    }
    return fds;
}

void remove_unix_listener(const ListenAddress& listen) {
    struct stat st;
    if (!listen.unix_path.empty() && lstat(listen.unix_path.c_str(), &st) == 0 &&
        S_ISSOCK(st.st_mode))
        ::unlink(listen.unix_path.c_str());
}

SocketAddress local_address(int fd) {
    SocketAddress address;
    address.length = sizeof address.storage;
    getsockname(fd, &address.storage.any, &address.length);
    return address;
}

} // namespace lepus
