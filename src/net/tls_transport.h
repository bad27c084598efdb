// TlsTransport: the Transport of a connection that came in on a TLS listener.
// OpenSSL over the non-blocking socket, as nginx's ngx_ssl_recv/ngx_ssl_write:
// the engines above see plain bytes and never ask which transport they have.
//
// - The handshake runs inside read() and writev(): kIoAgain until it is done,
//   under the engine's header deadline (a stalled ClientHello is a slowloris).
//   A handshake that needs to write while the socket is full sets
//   wants_write(), so that an EPOLLOUT edge alone drives the connection.
// - read() keeps calling SSL_read until the caller's buffer is full or the
//   socket is drained, so Transport's "a short read drained everything"
//   contract holds even though OpenSSL hands out one record at a time. The
//   socket's reads note when the last recv was short, so a request that came
//   whole costs one recv, not a second one for EAGAIN.
// - After the handshake OpenSSL reads through a reader BIO shared by the
//   thread's connections (each call says whose socket it is), and the
//   connection's own socket BIO is freed: an idle connection is smaller.
// - Writes go out in records of at most 16 KiB, but not a send() each: after
//   the handshake OpenSSL writes its records into a per-thread gathering
//   buffer (a BIO of ours, as h2o gathers records before one write), and up
//   to kBatchBytes of plaintext leave in one send(). A 100 KiB response is
//   two system calls instead of seven, and its segments are larger.
// - Bytes the socket refused stay here (held_), already encrypted, and the
//   plaintext they carry is not reported as written: the caller offers the
//   same bytes again, as for any kIoAgain, and the next call sends the held
//   records first and only then reports them. Nothing the engine believes
//   sent is ever in user space, so the engines need no flush call.
// - send_file(): with kTLS (SSL_OP_ENABLE_KTLS, a kernel with the `tls`
//   ULP and a cipher it knows), SSL_sendfile: the kernel encrypts the file's
//   pages, and writev() is sendmsg on the socket. Without it the
//   file is read with pread into a per-thread buffer and written as records.
//   zero_copy_files() stays false either way: an engine that sent a frame
//   header apart from its payload would pay a TLS record for each.
// - A plain HTTP request on the TLS port gets a 400 with one line of
//   explanation, as nginx's "The plain HTTP request was sent to HTTPS port".
#pragma once

#include "base/unique_fd.h"
#include "net/socket.h"
#include "net/transport.h"

#include <atomic>
#include <cstdint>
#include <openssl/ssl.h>
#include <string>
#include <string_view>

namespace lepus {

// TLS counters of one reactor, for the status page. Written by that reactor's
// thread only (load + store), read by any.
struct alignas(64) TlsCounters {
    std::atomic<uint64_t> connections{0};        // accepted on TLS listeners
    std::atomic<uint64_t> handshakes{0};         // completed
    std::atomic<uint64_t> resumed{0};            // of those, resumed from a ticket
    std::atomic<uint64_t> handshake_failures{0}; // bad versions, garbage, plain HTTP, EOF

    static void bump(std::atomic<uint64_t>& counter) {
        counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
};

// The counters of reactor `index` (there are at most kMaxTlsReactors).
inline constexpr size_t kMaxTlsReactors = 1024;
TlsCounters& tls_counters(size_t index);

class TlsTransport final : public Transport {
public:
    // Takes the socket; `context` is the SSL_CTX to start from (SNI may move
    // the connection to a site's). `peer` (for log lines) and `counters`
    // outlive the transport. A failed SSL_new shows as kIoError on first use.
    TlsTransport(UniqueFd fd, SSL_CTX* context, const SocketAddress& peer, TlsCounters& counters);
    ~TlsTransport() override;
    TlsTransport(const TlsTransport&) = delete;
    TlsTransport& operator=(const TlsTransport&) = delete;

    ssize_t read(char* buffer, size_t size) override;
    ssize_t writev(const iovec* iov, int count, bool more) override;
    ssize_t send_file(int file_fd, uint64_t offset, size_t length) override;
    // Sends close_notify (when the socket takes it), then the FIN.
    void shutdown_write() override;
    bool peer_left() override;
    int fd() const override { return fd_.get(); }
    // Also while records that OpenSSL wrote on its own (a key update, an
    // alert) wait in held_ for the socket. (Records that carry the engine's
    // bytes wait for its own next write: it was told kIoAgain.)
    bool wants_write() const override {
        return want_write_ || (!held_.empty() && held_plain_ == 0);
    }

    // Frees the TLS state and closes the socket now.
    void close();
    // After the handshake: "TLSv1.3", "TLS_AES_128_GCM_SHA256" (static strings).
    std::string_view protocol() const;
    std::string_view cipher() const;
    bool handshake_done() const { return handshake_done_; }
    // After the handshake: the kernel encrypts what this connection sends.
    bool ktls_send() const { return ktls_send_; }
    // What the socket's reads found (kept by a callback on the connection's
    // socket BIO during the handshake, by the thread's reader BIO after it).
    struct SocketReads {
        uint32_t calls = 0;   // recv calls, for tests (wraps)
        bool drained = false; // the last one got fewer bytes than asked
        bool eof = false;     // a recv found the end (after the handshake)
    };
    uint64_t socket_reads() const { return socket_reads_.calls; }
    // send() calls that carried records after the handshake (for tests: the
    // records of one write leave together).
    uint64_t record_sends() const { return record_sends_; }
    // When the handshake completes, protocol() and cipher() are also stored
    // here (e.g. the connection's CGI SSL_PROTOCOL and SSL_CIPHER), before the
    // first request is read. Both must outlive the transport.
    // `alpn_h2`: set when ALPN chose "h2".
    void publish_session_to(std::string_view* protocol, std::string_view* cipher,
                            bool* alpn_h2 = nullptr) {
        protocol_out_ = protocol;
        cipher_out_ = cipher;
        alpn_h2_out_ = alpn_h2;
    }

    // The most plaintext bytes per record (RFC 8446 §5.1).
    static constexpr size_t kRecordSize = 16384;
    // The first bytes of a connection go out in records that fit one TCP
    // segment (MSS 1460 less the record's 5-byte header, 16-byte tag and
    // content type, with room for TCP options): a client can decrypt and
    // start rendering the head of the first page from the first segments,
    // instead of waiting for a whole 16 KiB record to arrive through a cold
    // congestion window (h2o starts with small records for the same reason).
    static constexpr size_t kSmallRecordSize = 1400;
    static constexpr uint64_t kSmallRecordBytes = 16384; // how many bytes go that way
    // The most plaintext gathered for one send(): four full records. Larger
    // batches save little more and, when the socket refuses part of one, copy
    // more into held_.
    static constexpr size_t kBatchBytes = 4 * kRecordSize;

private:
    // 1 when the handshake is done, else kIoAgain or kIoError.
    ssize_t handshake();
    ssize_t handshake_failed(int ssl_error);
    // Drains the socket and answers the plain HTTP request with a 400.
    void answer_plain_http();
    // SSL_read until `size` bytes or the socket is drained (read()'s core).
    ssize_t read_records(char* buffer, size_t size);
    // Drops what a failed call gathered; returns kIoError.
    ssize_t discard_gathered();
    // Encrypts one record of `length` bytes into the gathering buffer:
    // `length` or kIoError.
    ssize_t seal(const char* data, size_t length);
    // Sends the gathered records that carry `plaintext` bytes: 1 when all
    // went, kIoAgain when the socket refused some (they move to held_, and
    // held_plain_ = plaintext), or kIoError.
    ssize_t ship(size_t plaintext);
    // Sends held_: 1 when it is empty now, kIoAgain or kIoError.
    ssize_t flush_held();
    // Before new records are made: held_ must be gone. 0 to go on; else the
    // result to return (the held plaintext, now sent, at most `offered`;
    // kIoAgain or kIoError).
    ssize_t finish_held(size_t offered);
    // After an OpenSSL call that may have written on its own (SSL_read,
    // SSL_peek, SSL_shutdown): sends what it gathered, behind held_. False
    // when the socket is broken.
    bool push_gathered();
    // errno for an SSL_ERROR_* that ends the connection; returns kIoError.
    ssize_t io_failed(int ssl_error);
    // The most plaintext the next record may carry.
    size_t record_limit() const {
        return sent_ < kSmallRecordBytes ? kSmallRecordSize : kRecordSize;
    }

    // Sizes matter here: every connection's ClientConnection holds room for
    // a TlsTransport (a variant), and 24 bytes less put it in a smaller
    // tcmalloc size class (576 bytes instead of 640).
    UniqueFd fd_;
    uint32_t held_plain_ = 0; // the plaintext in held_ not yet reported as written
    SSL* ssl_ = nullptr;
    const SocketAddress& peer_;
    TlsCounters& counters_;
    std::string_view* protocol_out_ = nullptr;
    std::string_view* cipher_out_ = nullptr;
    bool* alpn_h2_out_ = nullptr;
    std::string held_;          // encrypted records the socket has not taken yet
    uint32_t sent_ = 0;         // plaintext bytes written, up to kSmallRecordBytes
    uint32_t record_sends_ = 0; // for tests (wraps)
    SocketReads socket_reads_;
    bool broken_ = false;    // a fatal error: no close_notify (OpenSSL forbids SSL_shutdown)
    bool shut_down_ = false; // close_notify already sent
    bool handshake_done_ = false;
    bool want_write_ = false;
    bool ktls_send_ = false;
};

} // namespace lepus
