#include "net/quic_tls.h"

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <utility>

namespace lepus {

namespace {

// RFC 9001 §4.2: TLS 1.3 only; §8.4: no middlebox compatibility mode.
constexpr const char* kPriority =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
    "+AES-256-GCM:+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
    "+GROUP-SECP384R1";

constexpr unsigned char kAlpnH3[] = {'h', '3'};

// RFC 9001 §8.1: the handshake fails unless ALPN chose h3.
int check_alpn(gnutls_session_t session, unsigned, unsigned, unsigned, const gnutls_datum_t*) {
    gnutls_datum_t chosen;
    if (gnutls_alpn_get_selected_protocol(session, &chosen) != 0) return -1;
    if (chosen.size != sizeof kAlpnH3 || chosen.data[0] != 'h' || chosen.data[1] != '3') return -1;
    return 0;
}

} // namespace

struct QuicCredentials {
    gnutls_certificate_credentials_st* credentials = nullptr;
    ~QuicCredentials() {
        if (credentials) gnutls_certificate_free_credentials(credentials);
    }
};

QuicTlsSession::~QuicTlsSession() {
    if (session_) gnutls_deinit(session_); // before the credentials it uses
}

QuicTlsSession::QuicTlsSession(QuicTlsSession&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      credentials_(std::move(other.credentials_)) {}

QuicTlsSession& QuicTlsSession::operator=(QuicTlsSession&& other) noexcept {
    if (this != &other) {
        if (session_) gnutls_deinit(session_);
        session_ = std::exchange(other.session_, nullptr);
        credentials_ = std::move(other.credentials_);
    }
    return *this;
}

QuicTlsContext::~QuicTlsContext() {
    if (priority_) gnutls_priority_deinit(priority_);
}

bool QuicTlsContext::init_priority(std::string& error) {
    if (priority_) return true;
    if (gnutls_priority_init(&priority_, kPriority, nullptr) == 0) return true;
    priority_ = nullptr;
    error = "QUIC: gnutls_priority_init failed";
    return false;
}

bool QuicTlsContext::load(const TlsSettings& settings, std::string& error) {
    if (!init_priority(error)) return false;
    std::shared_ptr<const QuicCredentials> credentials = read_credentials(settings, error);
    if (!credentials) return false;
    publish(std::move(credentials));
    return true;
}

std::shared_ptr<const QuicCredentials> QuicTlsContext::read_credentials(const TlsSettings& settings,
                                                                        std::string& error) const {
    if (settings.default_certificates.empty() && settings.sites.empty()) {
        error = "QUIC: a quic:// listener needs a certificate (--tls-cert or a site's tls)";
        return nullptr;
    }
    auto credentials = std::make_shared<QuicCredentials>();
    if (gnutls_certificate_allocate_credentials(&credentials->credentials) != 0) {
        error = "QUIC: gnutls_certificate_allocate_credentials failed";
        return nullptr;
    }
    auto add = [&](const TlsCertificate& certificate) {
        int rv = gnutls_certificate_set_x509_key_file(
            credentials->credentials, certificate.cert_path.c_str(), certificate.key_path.c_str(),
            GNUTLS_X509_FMT_PEM);
        if (rv < 0)
            error = "QUIC: cannot load " + certificate.cert_path + " and " + certificate.key_path +
                    " with GnuTLS: " + gnutls_strerror(rv);
        return rv >= 0;
    };
    // The default first: GnuTLS answers a name no certificate has with the first one.
    for (const TlsCertificate& certificate : settings.default_certificates)
        if (!add(certificate)) return nullptr;
    for (const TlsSite& site : settings.sites)
        for (const TlsCertificate& certificate : site.certificates)
            if (!add(certificate)) return nullptr;
    return credentials;
}

void QuicTlsContext::publish(std::shared_ptr<const QuicCredentials> credentials) {
    std::lock_guard lock(mutex_);
    credentials_ = std::move(credentials); // the old ones live on in their sessions
}

QuicTlsSession QuicTlsContext::make_session(void* conn_ref) const {
    QuicTlsSession made;
    {
        std::lock_guard lock(mutex_);
        made.credentials_ = credentials_;
    }
    if (!made.credentials_ || !priority_) return made;
    gnutls_session_t session = nullptr;
    if (gnutls_init(&session,
                    GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET | GNUTLS_NO_END_OF_EARLY_DATA) != 0)
        return made;
    gnutls_datum_t alpn{const_cast<unsigned char*>(kAlpnH3), sizeof kAlpnH3};
    if (gnutls_priority_set(session, priority_) != 0 ||
        ngtcp2_crypto_gnutls_configure_server_session(session) != 0 ||
        gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, made.credentials_->credentials) !=
            0 ||
        gnutls_alpn_set_protocols(session, &alpn, 1,
                                  GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE) != 0) {
        gnutls_deinit(session);
        return made;
    }
    gnutls_handshake_set_hook_function(session, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_POST,
                                       check_alpn);
    gnutls_session_set_ptr(session, conn_ref);
    made.session_ = session;
    return made;
}

} // namespace lepus
