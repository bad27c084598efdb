#include "net/tls_transport.h"

#include "log/error_log.h"
#include "net/detail/tls_bios.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace lepus {
using detail::gathered;
using detail::gathering_bio;
using detail::note_socket_read;
using detail::reader_bio;
using detail::ReadingFrom;
using detail::record_buffer;

namespace {

// Before the last record of a connection (close_notify): lifts the listener's
// TCP_NOTSENT_LOWAT (--notsent-lowat), which can refuse even a write this
// small while that much is queued unsent behind a slow reader. The alert would then
// be dropped and the client would see a truncated stream. The send buffer
// alone limits it again, as before the option. Best effort: a Unix socket
// has no such option.
void lift_send_limit(int fd) {
    int unlimited = INT32_MAX;
    setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unlimited, sizeof unlimited);
}

// What one send_file() call encrypts at most before it lets the engine look
// at its pass budget again.
constexpr size_t kFileBytesPerCall = 16 * TlsTransport::kRecordSize;

// Sends as much of [data, data + length) as the socket takes: bytes sent
// (possibly 0) or kIoError.
ssize_t send_some(int fd, const char* data, size_t length, uint32_t& calls) {
    size_t sent = 0;
    while (sent < length) {
        ++calls;
        ssize_t n = ::send(fd, data + sent, length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return kIoError;
    }
    return ssize_t(sent);
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
    if (ssl_) {
        BIO* socket = SSL_get_rbio(ssl_);
        BIO_set_callback_ex(socket, note_socket_read);
        BIO_set_callback_arg(socket, reinterpret_cast<char*>(&socket_reads_));
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
    // OpenSSL forbids SSL_shutdown, nor behind records still waiting.
    if (ssl_ && handshake_done_ && !broken_ && !shut_down_ && held_.empty()) {
        ReadingFrom socket(fd_.get(), socket_reads_);
        lift_send_limit(fd_.get());
        ERR_clear_error();
        SSL_shutdown(ssl_);
        ERR_clear_error();
        push_gathered();
    }
    gathered().clear();
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
        ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
        if (!ktls_send_) {
            // From here on records are gathered and sent in batches. The
            // handshake itself wrote straight to the socket: OpenSSL buffers
            // and flushes its flights on its own.
            if (BIO* gather = gathering_bio(); gather && BIO_up_ref(gather) == 1)
                SSL_set0_wbio(ssl_, gather);
            // And reads go through the thread's reader: the connection's own
            // socket BIO, now in neither slot, is freed. (What OpenSSL read
            // ahead is in its record buffer, not in the BIO.)
            if (BIO* reader = reader_bio(); reader && BIO_up_ref(reader) == 1)
                SSL_set0_rbio(ssl_, reader);
        }
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
    ReadingFrom socket(fd_.get(), socket_reads_);
    if (!handshake_done_)
        if (ssize_t done = handshake(); done != 1) return done;
    // An EPOLLOUT edge for records OpenSSL wrote on its own comes through
    // here; records that carry the engine's bytes wait for its next write,
    // which reports them.
    if (!held_.empty() && held_plain_ == 0 && flush_held() == kIoError) return kIoError;
    ssize_t got = read_records(buffer, size);
    // SSL_read may have written (a key update's answer, an alert).
    if (!push_gathered() && got == kIoAgain) return kIoError;
    return got;
}

ssize_t TlsTransport::read_records(char* buffer, size_t size) {
    size_t got = 0;
    while (got < size) {
        size_t n = 0;
        ERR_clear_error();
        int result = SSL_read_ex(ssl_, buffer + got, size - got, &n);
        if (result == 1) {
            got += n;
            // The socket's last read was short and OpenSSL holds nothing
            // more (no record, no partial one): the socket is drained, and
            // asking again would only cost a recv that says EAGAIN.
            if (got < size && socket_reads_.drained && !SSL_has_pending(ssl_)) break;
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

ssize_t TlsTransport::seal(const char* data, size_t length) {
    size_t written = 0;
    ERR_clear_error();
    // The gathering BIO takes everything: success, or a fatal error.
    int result = SSL_write_ex(ssl_, data, length, &written);
    if (result != 1) return io_failed(SSL_get_error(ssl_, result));
    // Only compared with kSmallRecordBytes: it stops there.
    sent_ = uint32_t(std::min<uint64_t>(uint64_t(sent_) + length, kSmallRecordBytes));
    return ssize_t(length);
}

ssize_t TlsTransport::ship(size_t plaintext) {
    // Called with nothing held: push_gathered sends, and keeps what the
    // socket refused.
    if (!push_gathered()) return kIoError;
    if (held_.empty()) return 1;
    held_plain_ = uint32_t(plaintext); // at most kBatchBytes and a record
    return kIoAgain;
}

ssize_t TlsTransport::flush_held() {
    ssize_t n = send_some(fd_.get(), held_.data(), held_.size(), record_sends_);
    if (n == kIoError) {
        broken_ = true;
        return kIoError;
    }
    held_.erase(0, size_t(n));
    if (!held_.empty()) return kIoAgain;
    std::string().swap(held_); // an idle connection keeps no buffer
    return 1;
}

ssize_t TlsTransport::finish_held(size_t offered) {
    if (held_plain_ == 0 && held_.empty()) return 0;
    if (!held_.empty())
        if (ssize_t flushed = flush_held(); flushed != 1) return flushed;
    // The caller offers the held plaintext again (it was told nothing was
    // taken): it is sent now, so say so; never more than it offers.
    size_t plaintext = std::min<size_t>(held_plain_, offered);
    held_plain_ -= uint32_t(plaintext);
    return ssize_t(plaintext);
}

bool TlsTransport::push_gathered() {
    std::string& out = gathered();
    if (out.empty()) return true;
    if (held_.empty()) {
        ssize_t n = send_some(fd_.get(), out.data(), out.size(), record_sends_);
        if (n == kIoError) {
            out.clear();
            broken_ = true;
            return false;
        }
        held_.assign(out, size_t(n));
    } else {
        held_.append(out); // behind what waits already, in order
    }
    out.clear();
    if (held_.empty()) std::string().swap(held_);
    return true;
}

namespace {

// Walks the caller's vector one record at a time. Small pieces (a response
// head and a short body) are gathered into one record, so that they cost one
// record and not one each.
class RecordCursor {
public:
    RecordCursor(const iovec* iov, int count) : iov_(iov), count_(count) { skip_empty(); }

    bool done() const { return index_ == count_; }
    // The next record's plaintext, at most `limit` bytes (in record_buffer()
    // when gathered); advance() past what was taken of it.
    std::string_view next(size_t limit) const {
        const char* data = static_cast<const char*>(iov_[index_].iov_base) + offset_;
        size_t length = iov_[index_].iov_len - offset_;
        if (length >= limit || index_ + 1 == count_) return {data, std::min(length, limit)};
        char* record = record_buffer();
        size_t filled = 0;
        for (int i = index_; i < count_ && filled < limit; ++i) {
            size_t skip = i == index_ ? offset_ : 0;
            size_t take = std::min(iov_[i].iov_len - skip, limit - filled);
            if (take == 0) continue; // an empty piece may have no base at all
            std::memcpy(record + filled, static_cast<const char*>(iov_[i].iov_base) + skip, take);
            filled += take;
        }
        return {record, filled};
    }
    void advance(size_t length) {
        while (length > 0) {
            size_t step = std::min(length, iov_[index_].iov_len - offset_);
            offset_ += step;
            length -= step;
            skip_empty();
        }
    }

private:
    void skip_empty() {
        while (index_ < count_ && offset_ == iov_[index_].iov_len) {
            ++index_;
            offset_ = 0;
        }
    }

    const iovec* iov_;
    int count_;
    int index_ = 0;
    size_t offset_ = 0; // into iov_[index_]
};

} // namespace

ssize_t TlsTransport::writev(const iovec* iov, int count, bool more) {
    want_write_ = false;
    if (!ssl_) return (errno = ENOTCONN), kIoError;
    ReadingFrom socket(fd_.get(), socket_reads_);
    if (!handshake_done_)
        if (ssize_t done = handshake(); done != 1) return done;
    // With kTLS the kernel encrypts whatever the socket is given as
    // application data (Linux's Documentation/networking/tls.rst): no
    // SSL_write, so nothing of a refused write waits inside OpenSSL, and
    // MSG_MORE keeps a head and its body in one record.
    if (ktls_send_) return socket_writev(fd_.get(), iov, count, more);
    size_t offered = 0;
    for (int i = 0; i < count; ++i)
        offered += iov[i].iov_len;
    if (ssize_t held = finish_held(offered); held != 0) return held;
    size_t total = 0;
    size_t batch = 0; // plaintext gathered, not yet sent
    RecordCursor cursor(iov, count);
    for (;;) {
        if (cursor.done() || batch >= kBatchBytes) {
            if (batch == 0) return ssize_t(total);
            ssize_t shipped = ship(batch);
            if (shipped != 1) return shipped == kIoAgain && total > 0 ? ssize_t(total) : shipped;
            total += std::exchange(batch, 0);
            continue;
        }
        std::string_view record = cursor.next(record_limit());
        if (seal(record.data(), record.size()) < 0) return discard_gathered();
        batch += record.size();
        cursor.advance(record.size());
    }
}

ssize_t TlsTransport::send_file(int file_fd, uint64_t offset, size_t length) {
    want_write_ = false;
    if (!ssl_) return (errno = ENOTCONN), kIoError;
    ReadingFrom socket(fd_.get(), socket_reads_);
    if (ktls_send_) {
        // The kernel encrypts the file's pages as it sends them: zero-copy,
        // as sendfile on a plain socket.
        ERR_clear_error();
        ossl_ssize_t sent = SSL_sendfile(ssl_, file_fd, off_t(offset), length, 0);
        if (sent >= 0) return ssize_t(sent);
        int error = SSL_get_error(ssl_, int(sent));
        return error == SSL_ERROR_WANT_WRITE ? kIoAgain : io_failed(error);
    }
    if (ssize_t held = finish_held(length); held != 0) return held;
    size_t total = 0;
    size_t batch = 0; // plaintext gathered, not yet sent
    char* record = record_buffer();
    bool ended = false; // the file ended early
    while (!ended && total + batch < length && total + batch < kFileBytesPerCall) {
        size_t at = total + batch;
        size_t chunk = std::min(length - at, record_limit());
        ssize_t n = ::pread(file_fd, record, chunk, off_t(offset + at));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && batch + total == 0) return discard_gathered();
        if (n <= 0) {
            ended = true; // send what was read; a read error shows on the next call
            break;
        }
        if (seal(record, size_t(n)) < 0) return discard_gathered();
        batch += size_t(n);
        if (batch >= kBatchBytes) {
            ssize_t shipped = ship(batch);
            if (shipped != 1) return shipped == kIoAgain && total > 0 ? ssize_t(total) : shipped;
            total += std::exchange(batch, 0);
        }
    }
    if (batch > 0) {
        ssize_t shipped = ship(batch);
        if (shipped != 1) return shipped == kIoAgain && total > 0 ? ssize_t(total) : shipped;
        total += batch;
    }
    return ssize_t(total);
}

ssize_t TlsTransport::discard_gathered() {
    // Records of a failed call never leave: the connection is broken.
    gathered().clear();
    return kIoError;
}

void TlsTransport::shutdown_write() {
    if (ssl_ && handshake_done_) {
        ReadingFrom socket(fd_.get(), socket_reads_);
        lift_send_limit(fd_.get());
        ERR_clear_error();
        SSL_shutdown(ssl_); // close_notify (RFC 8446 §6.1); the socket may refuse it
        ERR_clear_error();
        push_gathered();
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
    ReadingFrom socket(fd_.get(), socket_reads_);
    size_t peeked = 0;
    ERR_clear_error();
    int result = SSL_peek_ex(ssl_, &byte, 1, &peeked);
    bool closed = result != 1 && SSL_get_error(ssl_, result) == SSL_ERROR_ZERO_RETURN;
    ERR_clear_error();
    push_gathered(); // SSL_peek may have answered a key update
    return closed;
}

} // namespace lepus
