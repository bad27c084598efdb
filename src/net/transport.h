// Transport: the byte stream under one client connection, as the protocol
// engines see it. Plain TCP now (PlainTransport); TLS will be a second
// implementation, swapped in under the same calls, as nginx swaps c->recv,
// c->send and c->send_chain when a connection turns to SSL
// (src/event/ngx_event_openssl.c). The engines never ask which one they have.
//
// Every call is non-blocking and edge-triggered-friendly: a result of
// kIoAgain means "nothing more until the next readiness edge". EINTR is
// retried inside. After kIoError, errno says why (is_disconnect() tells a
// vanished peer from a real failure).
#pragma once

#include "base/unique_fd.h"

#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <sys/uio.h>

namespace lepus {

// Beside a byte count (> 0) or 0 (end of stream), a call may answer:
inline constexpr ssize_t kIoError = -1; // the connection is broken; errno says why
inline constexpr ssize_t kIoAgain = -2; // would block: wait for the next edge

// True for the errno values of a peer that went away (reset, broken pipe):
// worth an info line at most, never an error.
bool is_disconnect(int error_number);

// sendmsg(2) of `iov` on a socket with the Transport's return convention:
// bytes sent, kIoAgain or kIoError. `more`: MSG_MORE.
ssize_t socket_writev(int fd, const iovec* iov, int count, bool more);

class Transport {
public:
    virtual ~Transport() = default;

    // Reads up to `size` bytes: > 0 bytes read, 0 at end of stream, kIoAgain or
    // kIoError. A read that returns fewer bytes than asked has drained
    // everything the transport holds: the next arrival raises a new edge.
    virtual ssize_t read(char* buffer, size_t size) = 0;
    // Writes the `count` buffers of `iov` in order, possibly partially: bytes
    // written, kIoAgain or kIoError. `more`: more bytes follow at once (the head
    // of a file response), so a segment may wait for them (MSG_MORE).
    virtual ssize_t writev(const iovec* iov, int count, bool more) = 0;
    // Sends `length` bytes of `file_fd` from `offset` (the file position is not
    // used): bytes sent, 0 when the file ended early, kIoAgain or kIoError.
    virtual ssize_t send_file(int file_fd, uint64_t offset, size_t length) = 0;
    // Ends our direction (FIN after what is queued); reading goes on.
    virtual void shutdown_write() = 0;
    // True when the peer closed its side and sent nothing we have not read:
    // it left (a client that half-closes after a pipelined request still has
    // that request waiting).
    virtual bool peer_left() = 0;
    // The socket, for the poller and for getsockname.
    virtual int fd() const = 0;
    // True when the transport itself waits for the socket to take bytes (a
    // TLS handshake or an SSL_read that needs to write): an EPOLLOUT edge
    // alone must then drive the connection.
    virtual bool wants_write() const { return false; }
    // True when send_file() moves file bytes without passing them through user
    // memory (sendfile on a plain socket): an engine that frames a file (HTTP/2
    // DATA) then does better to hand the payload to send_file() than to read it
    // into its output. A property of the transport, not a question of which one
    // it is: a kTLS transport would answer true too.
    virtual bool zero_copy_files() const { return false; }
};

// Reads and drops what the peer sends (a lingering close), at most `budget`
// bytes: kIoAgain when it has nothing more now, 0 at its end of stream or on
// an error (close now), 1 when the budget ran out first (come back later).
ssize_t drain_input(Transport& transport, size_t budget);

// A TCP (or Unix) socket as it is: read, sendmsg, sendfile.
class PlainTransport final : public Transport {
public:
    explicit PlainTransport(UniqueFd fd) : fd_(std::move(fd)) {}

    ssize_t read(char* buffer, size_t size) override;
    ssize_t writev(const iovec* iov, int count, bool more) override;
    ssize_t send_file(int file_fd, uint64_t offset, size_t length) override;
    void shutdown_write() override;
    bool peer_left() override;
    int fd() const override { return fd_.get(); }
    bool zero_copy_files() const override { return true; }

    // Closes the socket now (the connection is being torn down).
    void close() { fd_.reset(); }

private:
    UniqueFd fd_;
};

} // namespace lepus
