#include "net/tls_transport.h"

#include "log/error_log.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lepus {
namespace {

// What one send_file() call encrypts at most before it lets the engine look
// at its pass budget again.
constexpr size_t kFileBytesPerCall = 16 * TlsTransport::kRecordSize;

// Plaintext gathered for one record, and file bytes read for one record:
// one per reactor thread, since a record is written before the next is made.
char* record_buffer() {
    alignas(64) static thread_local char buffer[TlsTransport::kRecordSize];
    return buffer;
}

std::string_view reason_text(unsigned long code) {
    const char* text = ERR_reason_error_string(code);
    return text ? text : "unknown TLS error";
}

constexpr std::string_view kPlainHttpAnswer = "HTTP/1.1 400 Bad Request\r\n"
                                              "Content-Type: text/plain\r\n"
                                              "Content-Length: 46\r\n"
                                              "Connection: close\r\n"
                                              "\r\n"
                                              "The plain HTTP request was sent to HTTPS port\n";

} // namespace

TlsCounters& tls_counters(size_t index) {
    static std::array<TlsCounters, kMaxTlsReactors> counters;
    return counters[std::min(index, kMaxTlsReactors - 1)];
}

TlsTransport::TlsTransport(UniqueFd fd, SSL_CTX* context, const SocketAddress& peer,
                           TlsCounters& counters)
    : fd_(std::move(fd)), peer_(peer), counters_(counters) {
    TlsCounters::bump(counters_.connections);
    ssl_ = context ? SSL_new(context) : nullptr;
    if (ssl_ && SSL_set_fd(ssl_, fd_.get()) != 1) {
        SSL_free(ssl_);
        ssl_ = nullptr;
    }
    if (ssl_) SSL_set_accept_state(ssl_);
}

TlsTransport::~TlsTransport() {
    close();
}

void TlsTransport::close() {
    // An orderly close says so: close_notify before the FIN (RFC 8446 §6.1).
    // Without it a client that reads to the end (ab, HTTP/1.0 without
    // keepalive) sees a truncation attack and counts the response as failed.
    // Best effort on a non-blocking socket; never after a fatal error, where
    // OpenSSL forbids SSL_shutdown, nor over a record still half-sent.
    if (ssl_ && handshake_done_ && !broken_ && !shut_down_ && pending_ == 0) {
        ERR_clear_error();
        SSL_shutdown(ssl_);
        ERR_clear_error();
    }
    SSL_free(ssl_);
    ssl_ = nullptr;
    fd_.reset();
}

std::string_view TlsTransport::protocol() const {
    return ssl_ && handshake_done_ ? SSL_get_version(ssl_) : "";
}

std::string_view TlsTransport::cipher() const {
    const char* name = ssl_ && handshake_done_ ? SSL_get_cipher_name(ssl_) : nullptr;
    return name ? name : "";
}

ssize_t TlsTransport::handshake() {
    ERR_clear_error();
    int result = SSL_do_handshake(ssl_);
    if (result == 1) {
        handshake_done_ = true;
        TlsCounters::bump(counters_.handshakes);
        if (SSL_session_reused(ssl_)) TlsCounters::bump(counters_.resumed);
        if (protocol_out_) *protocol_out_ = protocol();
        if (cipher_out_) *cipher_out_ = cipher();
        if (alpn_h2_out_) {
            const unsigned char* alpn = nullptr;
            unsigned int alpn_length = 0;
            SSL_get0_alpn_selected(ssl_, &alpn, &alpn_length);
            *alpn_h2_out_ = alpn_length == 2 && alpn[0] == 'h' && alpn[1] == '2';
        }
        return 1;
    }
    int error = SSL_get_error(ssl_, result);
    if (error == SSL_ERROR_WANT_READ) return kIoAgain;
    if (error == SSL_ERROR_WANT_WRITE) {
        want_write_ = true;
        return kIoAgain;
    }
    return handshake_failed(error);
}

// Failures are the client's business (old protocols, scanners, plain HTTP):
// counted and logged at info, as nginx logs "SSL_do_handshake() failed" at info.
ssize_t TlsTransport::handshake_failed(int ssl_error) {
    TlsCounters::bump(counters_.handshake_failures);
    unsigned long code = ERR_peek_error();
    std::string peer = peer_.to_string();
    if (ssl_error == SSL_ERROR_SSL && ERR_GET_REASON(code) == SSL_R_HTTP_REQUEST) {
        // OpenSSL recognised "GET ", "POST ", "HEAD " or "PUT " and sent no alert.
        answer_plain_http();
        log_info("client %s: plain HTTP request on a TLS port, answered 400", peer.c_str());
        ERR_clear_error();
        errno = EPROTO;
        return kIoError;
    }
    if (ssl_error == SSL_ERROR_SYSCALL && code == 0)
        log_info("client %s: TLS handshake failed: %s", peer.c_str(),
                 errno ? strerror(errno) : "connection closed");
    else
        log_info("client %s: TLS handshake failed: %s", peer.c_str(),
                 std::string(reason_text(code)).c_str());
    return io_failed(ssl_error);
}

void TlsTransport::answer_plain_http() {
    // Read what the client sent first, so that closing with unread bytes
    // does not turn into an RST that destroys the answer.
    char* sink = record_buffer();
    for (int i = 0; i < 4 && ::recv(fd_.get(), sink, kRecordSize, MSG_DONTWAIT) > 0; ++i) {
    }
    [[maybe_unused]] ssize_t n = ::send(fd_.get(), kPlainHttpAnswer.data(), kPlainHttpAnswer.size(),
                                        MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd_.get(), SHUT_WR);
}

ssize_t TlsTransport::io_failed(int ssl_error) {
    broken_ = true;
    // SSL_ERROR_SYSCALL leaves the socket's errno; a protocol error has none.
    if (ssl_error != SSL_ERROR_SYSCALL || errno == 0) errno = EPROTO;
    ERR_clear_error();
    return kIoError;
}

ssize_t TlsTransport::read(char* buffer, size_t size) {
    want_write_ = false;
    if (!ssl_) return (errno = ENOTCONN), kIoError;
    if (!handshake_done_)
        if (ssize_t done = handshake(); done != 1) return done;
    size_t got = 0;
    while (got < size) {
        size_t n = 0;
        ERR_clear_error();
        int result = SSL_read_ex(ssl_, buffer + got, size - got, &n);
        if (result == 1) {
            got += n;
            continue;
        }
        int error = SSL_get_error(ssl_, result);
        if (error == SSL_ERROR_WANT_READ) break; // the socket is drained
        if (error == SSL_ERROR_WANT_WRITE) {
            want_write_ = true;
            break;
        }
        if (error == SSL_ERROR_ZERO_RETURN) return ssize_t(got); // close_notify: the end
        // What was decrypted before the failure is still the client's; the
        // failure repeats on the next call (OpenSSL's error state is sticky).
        if (got > 0) return ssize_t(got);
        return io_failed(error);
    }
    return got > 0 ? ssize_t(got) : kIoAgain;
}

ssize_t TlsTransport::write_record(const char* data, size_t length) {
    size_t written = 0;
    ERR_clear_error();
    int result = SSL_write_ex(ssl_, data, length, &written);
    if (result == 1) {
        pending_ = 0;
        sent_ += length;
        return ssize_t(length);
    }
    int error = SSL_get_error(ssl_, result);
    if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
        // OpenSSL holds the encrypted record; the retry must ask for the same length.
        pending_ = length;
        return kIoAgain;
    }
    return io_failed(error);
}

ssize_t TlsTransport::finish_pending() {
    // ACCEPT_MOVING_WRITE_BUFFER: OpenSSL only flushes what it encrypted,
    // so any buffer of the same length does.
    return write_record(record_buffer(), pending_);
}

ssize_t TlsTransport::writev(const iovec* iov, int count, bool more) {
    want_write_ = false;
    if (!ssl_) return (errno = ENOTCONN), kIoError;
    if (!handshake_done_)
        if (ssize_t done = handshake(); done != 1) return done;
    if (pending_ > 0) return finish_pending();
    size_t total = 0;
    int index = 0;
    size_t offset = 0; // into iov[index]
    for (;;) {
        while (index < count && offset == iov[index].iov_len) {
            ++index;
            offset = 0;
        }
        if (index == count) return ssize_t(total);
        const char* data = static_cast<const char*>(iov[index].iov_base) + offset;
        size_t length = iov[index].iov_len - offset;
        size_t limit = record_limit();
        if (length < limit && index + 1 < count) {
            // Gather the small pieces (a head and a body) into one record.
            char* record = record_buffer();
            size_t filled = 0;
            for (int i = index; i < count && filled < limit; ++i) {
                size_t skip = i == index ? offset : 0;
                size_t take = std::min(iov[i].iov_len - skip, limit - filled);
                if (take == 0) continue; // an empty piece may have no base at all
                std::memcpy(record + filled, static_cast<const char*>(iov[i].iov_base) + skip,
                            take);
                filled += take;
            }
            data = record;
            length = filled;
        }
        length = std::min(length, limit);
        ssize_t n = write_record(data, length);
        if (n < 0) return n == kIoAgain && total > 0 ? ssize_t(total) : n;
        total += length;
        // Advance over `length` bytes of the vector.
        for (size_t left = length; left > 0;) {
            size_t step = std::min(left, iov[index].iov_len - offset);
            offset += step;
            left -= step;
            if (offset == iov[index].iov_len && left > 0) {
                ++index;
                offset = 0;
            }
        }
    }
}

ssize_t TlsTransport::send_file(int file_fd, uint64_t offset, size_t length) {
    want_write_ = false;
    if (!ssl_) return (errno = ENOTCONN), kIoError;
    if (pending_ > 0) return finish_pending();
    size_t total = 0;
    char* record = record_buffer();
    while (total < length && total < kFileBytesPerCall) {
        size_t chunk = std::min(length - total, record_limit());
        ssize_t n = ::pread(file_fd, record, chunk, off_t(offset + total));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return total > 0 ? ssize_t(total) : kIoError;
        if (n == 0) return ssize_t(total); // the file ended early
        ssize_t written = write_record(record, size_t(n));
        if (written < 0) return written == kIoAgain && total > 0 ? ssize_t(total) : written;
        total += size_t(n);
    }
    return ssize_t(total);
}

void TlsTransport::shutdown_write() {
    if (ssl_ && handshake_done_) {
        ERR_clear_error();
        SSL_shutdown(ssl_); // close_notify (RFC 8446 §6.1); the socket may refuse it
        ERR_clear_error();
        shut_down_ = true;
    }
    ::shutdown(fd_.get(), SHUT_WR);
}

bool TlsTransport::peer_left() {
    if (!ssl_) return true;
    if (SSL_has_pending(ssl_)) return false;
    char byte;
    ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return false;
    // Bytes are waiting: a request, or only the client's close_notify.
    size_t peeked = 0;
    ERR_clear_error();
    int result = SSL_peek_ex(ssl_, &byte, 1, &peeked);
    if (result == 1) return false;
    bool closed = SSL_get_error(ssl_, result) == SSL_ERROR_ZERO_RETURN;
    ERR_clear_error();
    return closed;
}

} // namespace lepus
