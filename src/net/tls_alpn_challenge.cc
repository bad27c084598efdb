#include "net/tls_alpn_challenge.h"

#include <cstring>
#include <openssl/err.h>
#include <openssl/tls1.h>
#include <string_view>

namespace lepus {
namespace {

constexpr unsigned char kAcmeTls1[] = "\x0a"
                                      "acme-tls/1";

int select_acme_tls(SSL*, const unsigned char** out, unsigned char* out_length,
                    const unsigned char* offered, unsigned int offered_length, void*) {
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, out_length, kAcmeTls1, sizeof kAcmeTls1 - 1, offered,
                              offered_length) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

// Whether the ALPN extension (RFC 7301 §3.1: a 2-byte list length, then
// length-prefixed names) names "acme-tls/1".
bool offers_acme_tls(const unsigned char* data, size_t length) {
    if (length < 2) return false;
    size_t end = std::min(length, size_t(2) + (size_t(data[0]) << 8 | data[1]));
    for (size_t at = 2; at < end;) {
        size_t name_length = data[at];
        if (at + 1 + name_length > end) return false;
        if (std::string_view(reinterpret_cast<const char*>(data + at + 1), name_length) ==
            "acme-tls/1")
            return true;
        at += 1 + name_length;
    }
    return false;
}

// The host_name of the server_name extension (RFC 6066 §3), lower-cased.
std::string sni_host_name(const unsigned char* data, size_t length) {
    if (length < 5 || data[2] != TLSEXT_NAMETYPE_host_name) return {};
    size_t name_length = size_t(data[3]) << 8 | data[4];
    if (5 + name_length > length) return {};
    std::string name(reinterpret_cast<const char*>(data + 5), name_length);
    for (char& c : name)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return name;
}

} // namespace

TlsAlpnChallenges& TlsAlpnChallenges::process() {
    static TlsAlpnChallenges challenges;
    return challenges;
}

void TlsAlpnChallenges::add(const std::string& name, SslContextRef context) {
    std::lock_guard lock(mutex_);
    contexts_[name] = std::move(context);
}

void TlsAlpnChallenges::remove(const std::string& name) {
    std::lock_guard lock(mutex_);
    contexts_.erase(name);
}

SslContextRef TlsAlpnChallenges::find(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = contexts_.find(name);
    return it == contexts_.end() ? SslContextRef{} : it->second;
}

SslContextRef make_tls_alpn_challenge_context(X509* certificate, EVP_PKEY* key,
                                              std::string& error) {
    SslContextRef context(SSL_CTX_new(TLS_server_method()));
    if (!context || SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate(context.get(), certificate) != 1 ||
        SSL_CTX_use_PrivateKey(context.get(), key) != 1) {
        const char* reason = ERR_reason_error_string(ERR_peek_last_error());
        error = std::string("cannot make the TLS-ALPN-01 context: ") +
                (reason ? reason : "unknown OpenSSL error");
        ERR_clear_error();
        return {};
    }
    SSL_CTX_set_alpn_select_cb(context.get(), select_acme_tls, nullptr);
    return context;
}

bool answer_tls_alpn_challenge(SSL* ssl, bool& answered) {
    answered = false;
    const unsigned char* data = nullptr;
    size_t length = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &data,
                                  &length) != 1 ||
        !offers_acme_tls(data, length))
        return true;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &data, &length) != 1)
        return false; // RFC 8737 §3: the validator always sends SNI
    SslContextRef context = TlsAlpnChallenges::process().find(sni_host_name(data, length));
    if (!context) return false;
    // The connection takes its own reference; the servername callback then
    // finds no SNI table on this context and leaves it, and ALPN is chosen
    // by this context's callback: "acme-tls/1" only.
    SSL_set_SSL_CTX(ssl, context.get());
    answered = true;
    return true;
}

} // namespace lepus
