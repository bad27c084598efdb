// TLS-ALPN-01 (RFC 8737): the ACME CA's validator connects to port 443,
// offers only the ALPN protocol "acme-tls/1" with the name being validated in
// SNI, and expects a self-signed certificate carrying the key authorization's
// digest. The ACME client (src/acme) makes those certificates and publishes
// them here; the TLS listener's ClientHello callback (tls_context.cc) hands a
// connection offering "acme-tls/1" the context of its name, and refuses it
// with an alert when there is none, so that no site's real certificate is
// ever sent under that protocol (RFC 8737 §4).
#pragma once

#include "net/tls_context.h"

#include <map>
#include <mutex>
#include <openssl/ssl.h>
#include <string>

namespace lepus {

// The challenge certificates being validated now, by lower-case name. Written
// by the ACME thread, read by a reactor only for a ClientHello that offers
// "acme-tls/1" (a few per issuance), hence a plain mutex.
class TlsAlpnChallenges {
public:
    static TlsAlpnChallenges& process();

    void add(const std::string& name, SslContextRef context);
    void remove(const std::string& name);
    // The context for `name`; empty when no challenge is pending for it.
    SslContextRef find(const std::string& name);

private:
    std::mutex mutex_;
    std::map<std::string, SslContextRef> contexts_;
};

// A server context that offers `certificate` with `key` and accepts only the
// ALPN protocol "acme-tls/1". Empty with one line in `error` on failure.
SslContextRef make_tls_alpn_challenge_context(X509* certificate, EVP_PKEY* key, std::string& error);

// For the ClientHello callback: whether the hello offers "acme-tls/1", and if
// so switches the connection to the challenge context of its SNI name.
// Returns false (send an alert) when it offers "acme-tls/1" with no pending
// challenge for the name; true otherwise, `answered` telling which case.
bool answer_tls_alpn_challenge(SSL* ssl, bool& answered);

} // namespace lepus
