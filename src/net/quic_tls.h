// QuicTlsContext: the TLS 1.3 side of QUIC (RFC 9001), with GnuTLS through
// ngtcp2's crypto backend, because Debian 12's OpenSSL 3.0 has no QUIC API.
//
// It loads the same PEM files as the https:// listeners (TlsSettings: the
// default certificates first, then every site's) into one GnuTLS credential
// set; GnuTLS picks the certificate whose names match the client's SNI, and
// the first one when none does, which is the TCP listeners' choice too.
// ALPN is "h3" only (RFC 9114 §3.1): a client that offers nothing else is
// refused in the handshake.
//
// Certificates are read again when TCP's are (SIGHUP, a renewed ACME
// certificate): read_credentials() then publish(), any thread; new
// connections get the new ones, a connection keeps the credentials it began
// with (QuicTlsSession holds them).
//
// What moves with OpenSSL 3.5 or ngtcp2 1.x: this file alone (a
// SSL_CTX from tls_context.h and ngtcp2_crypto_ossl instead of GnuTLS);
// QuicConnection only asks for a session with make_session().
#pragma once

#include "net/tls_context.h"

#include <memory>
#include <mutex>
#include <string>

struct gnutls_session_int;
struct gnutls_certificate_credentials_st;
struct gnutls_priority_st;

namespace lepus {

// One set of certificates and keys, as GnuTLS holds them.
struct QuicCredentials;

// One connection's GnuTLS session, with the credentials it was made with: a
// reload does not pull them away from the connection.
class QuicTlsSession {
public:
    QuicTlsSession() = default;
    ~QuicTlsSession();
    QuicTlsSession(QuicTlsSession&& other) noexcept;
    QuicTlsSession& operator=(QuicTlsSession&& other) noexcept;

    gnutls_session_int* get() const { return session_; }
    explicit operator bool() const { return session_ != nullptr; }

private:
    friend class QuicTlsContext;
    gnutls_session_int* session_ = nullptr;
    std::shared_ptr<const QuicCredentials> credentials_;
};

class QuicTlsContext {
public:
    QuicTlsContext() = default;
    ~QuicTlsContext();
    QuicTlsContext(const QuicTlsContext&) = delete;
    QuicTlsContext& operator=(const QuicTlsContext&) = delete;

    // Reads every certificate of `settings` and publishes them; one line in
    // `error` on failure (the credentials in force, if any, stay).
    bool load(const TlsSettings& settings, std::string& error);
    // Reads every certificate of `settings`; null with one line in `error`.
    std::shared_ptr<const QuicCredentials> read_credentials(const TlsSettings& settings,
                                                            std::string& error) const;
    // Any thread: new connections use `credentials` from now on.
    void publish(std::shared_ptr<const QuicCredentials> credentials);
    // A server session for one connection, configured for QUIC by ngtcp2,
    // whose user pointer is `conn_ref` (an ngtcp2_crypto_conn_ref); empty on failure.
    QuicTlsSession make_session(void* conn_ref) const;

private:
    bool init_priority(std::string& error);

    mutable std::mutex mutex_; // guards credentials_ (the reactors read, a reload writes)
    std::shared_ptr<const QuicCredentials> credentials_;
    // kPriority parsed once and shared by every session (GnuTLS counts its
    // users): parsed per session it cost each QUIC connection about 8 KiB.
    gnutls_priority_st* priority_ = nullptr;
};

} // namespace lepus
