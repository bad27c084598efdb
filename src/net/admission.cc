#include "net/admission.h"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus {

bool accept_one(int listener, AcceptedSocket& socket) {
    for (;;) {
        socket.peer.length = sizeof socket.peer.storage;
        socket.fd = accept4(listener, &socket.peer.storage.any, &socket.peer.length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (socket.fd >= 0) return true;
        // ECONNABORTED: the client gave up while it waited in the backlog.
        if (errno != EINTR && errno != ECONNABORTED) return false;
    }
}

bool Admission::admit(AcceptedSocket& socket) {
    accepted_.fetch_add(1, std::memory_order_relaxed);
    if (max_connections_ > 0 && live_total_.load(std::memory_order_relaxed) >= max_connections_) {
        refuse(socket.fd, socket.tls);
        return false;
    }
    // TCP_NODELAY comes from the listener (open_listener): accepted sockets inherit it.
    live_total_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void Admission::refuse_admitted(int fd, bool tls) {
    live_total_.fetch_sub(1, std::memory_order_relaxed);
    refuse(fd, tls);
}

void Admission::refuse(int fd, bool tls) {
    static constexpr char kBusy[] =
        "HTTP/1.1 503 Service Unavailable\r\nServer: lepus\r\n"
        "Content-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
    // A TLS client would read plain text as a broken record: it only gets the
    // close (a handshake just to say 503 would cost more than the overload allows).
    if (!tls) {
        [[maybe_unused]] ssize_t n = send(fd, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ::close(fd);
    refused_.fetch_add(1, std::memory_order_relaxed);
}

} // namespace lepus
