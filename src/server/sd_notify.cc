#include "server/sd_notify.h"

#include "base/unique_fd.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

namespace lepus {

bool notify_service_manager(std::string_view state) {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@')) return false;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length >= sizeof address.sun_path) return false;
    memcpy(address.sun_path, path, length);
    if (path[0] == '@') address.sun_path[0] = '\0'; // an abstract socket
    UniqueFd fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) return false;
    auto size = socklen_t(offsetof(sockaddr_un, sun_path) + length);
    return sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                  reinterpret_cast<const sockaddr*>(&address), size) == ssize_t(state.size());
}

} // namespace lepus
