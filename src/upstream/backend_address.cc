#include "upstream/backend_address.h"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus::upstream {

std::optional<BackendAddress> parse_backend_address(std::string_view text) {
    BackendAddress address;
    address.text.assign(text);
    if (text.starts_with("unix:")) {
        std::string_view path = text.substr(5);
        auto* un = reinterpret_cast<sockaddr_un*>(&address.storage);
        if (path.empty() || path.size() >= sizeof un->sun_path ||
            path.find('\0') != std::string_view::npos)
            return std::nullopt;
        un->sun_family = AF_UNIX;
        std::memcpy(un->sun_path, path.data(), path.size());
        address.length = socklen_t(offsetof(sockaddr_un, sun_path) + path.size() + 1);
        return address;
    }
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view host = text.substr(0, colon), port_text = text.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535)
        return std::nullopt;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        std::string v6(host.substr(1, host.size() - 2));
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
        if (inet_pton(AF_INET6, v6.c_str(), &in6->sin6_addr) != 1) return std::nullopt;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(uint16_t(port));
        address.length = sizeof *in6;
        return address;
    }
    std::string v4(host == "localhost" ? std::string_view("127.0.0.1") : host);
    auto* in = reinterpret_cast<sockaddr_in*>(&address.storage);
    if (inet_pton(AF_INET, v4.c_str(), &in->sin_addr) != 1) return std::nullopt;
    in->sin_family = AF_INET;
    in->sin_port = htons(uint16_t(port));
    address.length = sizeof *in;
    return address;
}

std::string describe_connect_error(const BackendAddress& address, int error) {
    std::string text = strerror(error);
    if (error != EACCES || address.family() != AF_UNIX) return text;
    const auto* un = reinterpret_cast<const sockaddr_un*>(&address.storage);
    struct stat info {};
    if (::stat(un->sun_path, &info) != 0) return text;
    // Start-up only reaches here once per failed connection: getpwuid/getgrgid
    // read /etc/passwd, fine for an error path.
    std::string user = std::to_string(::geteuid());
    if (const passwd* entry = ::getpwuid(::geteuid())) user = entry->pw_name;
    std::string group_name = std::to_string(info.st_gid);
    if (const struct group* entry = ::getgrgid(info.st_gid)) group_name = entry->gr_name;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(info.st_mode & 07777));
    if (info.st_mode & S_IWGRP) {
        text += " (the socket is writable by the group \"" + group_name + "\" (mode " + mode +
                "): add the user lepus runs as to it: usermod -aG " + group_name + " " + user +
                ", or SupplementaryGroups=" + group_name + " in lepus.service)";
    } else {
        text += std::string(" (the socket's mode ") + mode +
                " lets only its owner connect: set listen.owner, listen.group and "
                "listen.mode = 0660 in php-fpm's pool, and add the user lepus runs as (\"" +
                user + "\") to that group)";
    }
    return text;
}

} // namespace lepus::upstream
