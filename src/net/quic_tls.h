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
// What moves with OpenSSL 3.5 or ngtcp2 1.x: this file alone (a
// SSL_CTX from tls_context.h and ngtcp2_crypto_ossl instead of GnuTLS);
// QuicConnection only asks for a session with make_session().
#pragma once

#include "net/tls_context.h"

#include <string>

struct gnutls_session_int;
struct gnutls_certificate_credentials_st;
struct gnutls_priority_st;

namespace lepus {

class QuicTlsContext {
public:
    QuicTlsContext() = default;
    ~QuicTlsContext();
    QuicTlsContext(const QuicTlsContext&) = delete;
    QuicTlsContext& operator=(const QuicTlsContext&) = delete;

    // Loads every certificate of `settings`; one line in `error` on failure.
    bool load(const TlsSettings& settings, std::string& error);
    // A server session for one connection, configured for QUIC by ngtcp2,
    // whose user pointer is `conn_ref` (an ngtcp2_crypto_conn_ref); null on failure.
    gnutls_session_int* make_session(void* conn_ref) const;

private:
    gnutls_certificate_credentials_st* credentials_ = nullptr;
    // kPriority parsed once and shared by every session (GnuTLS counts its
    // users): parsed per session it cost each QUIC connection about 8 KiB.
    gnutls_priority_st* priority_ = nullptr;
};

} // namespace lepus
