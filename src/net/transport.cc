#include "net/transport.h"

#include <cerrno>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus {

bool is_disconnect(int error_number) {
    return error_number == EPIPE || error_number == ECONNRESET || error_number == ENOTCONN ||
           error_number == ETIMEDOUT;
}

ssize_t PlainTransport::read(char* buffer, size_t size) {
    for (;;) {
        ssize_t n = ::read(fd_.get(), buffer, size);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        return errno == EAGAIN ? kIoAgain : kIoError;
    }
}

ssize_t socket_writev(int fd, const iovec* iov, int count, bool more) {
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(iov);
    message.msg_iovlen = size_t(count);
    // MSG_NOSIGNAL: a vanished peer is EPIPE, not a SIGPIPE for the process.
    int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
    for (;;) {
        ssize_t n = ::sendmsg(fd, &message, flags);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        return errno == EAGAIN ? kIoAgain : kIoError;
    }
}

ssize_t drain_input(Transport& transport, size_t budget) {
    char sink[4096];
    for (size_t total = 0; total < budget;) {
        ssize_t n = transport.read(sink, sizeof sink);
        if (n == kIoAgain) return kIoAgain;
        if (n <= 0) return 0;
        total += size_t(n);
    }
    return 1;
}

ssize_t PlainTransport::writev(const iovec* iov, int count, bool more) {
    return socket_writev(fd_.get(), iov, count, more);
}

ssize_t PlainTransport::send_file(int file_fd, uint64_t offset, size_t length) {
    for (;;) {
        auto position = off_t(offset);
        ssize_t n = ::sendfile(fd_.get(), file_fd, &position, length);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        return errno == EAGAIN ? kIoAgain : kIoError;
    }
}

void PlainTransport::shutdown_write() {
    ::shutdown(fd_.get(), SHUT_WR);
}

bool PlainTransport::peer_left() {
    char byte;
    return ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

} // namespace lepus
