#include "net/tls_context.h"

#include "base/clock.h"
#include "base/unique_fd.h"
#include "net/certificate_check.h"
#include "net/tls_alpn_challenge.h"
#include "net/tls_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>
#include <unordered_map>

namespace lepus {
namespace {

// ALPN protocol lists in wire format (RFC 7301 §3.1): length-prefixed names,
// the server's preference first (h2 when HTTP/2 is on, RFC 9113 §3.2).
struct AlpnList {
    const unsigned char* names;
    unsigned int length;
};
constexpr unsigned char kAlpnH2[] = "\x02h2\x08http/1.1";
constexpr unsigned char kAlpnHttp11[] = "\x08http/1.1";
constexpr AlpnList kWithH2{kAlpnH2, sizeof kAlpnH2 - 1};
constexpr AlpnList kHttp11Only{kAlpnHttp11, sizeof kAlpnHttp11 - 1};

// The last OpenSSL error as text, and the queue cleared.
std::string openssl_reason() {
    const char* text = ERR_reason_error_string(ERR_peek_last_error());
    std::string reason = text ? text : "unknown OpenSSL error";
    ERR_clear_error();
    return reason;
}

// One line naming `path` when it cannot be opened, else empty (OpenSSL's own
// message for a missing file is "system lib", which helps nobody).
std::string unreadable(const std::string& what, const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "cannot read " + what + " '" + path + "': " + strerror(errno);
    ::close(fd);
    return {};
}

bool load_pair(SSL_CTX* context, const TlsCertificate& pair, std::string& error) {
    if (error = unreadable("TLS certificate", pair.cert_path); !error.empty()) return false;
    if (error = unreadable("TLS key", pair.key_path); !error.empty()) return false;
    if (SSL_CTX_use_certificate_chain_file(context, pair.cert_path.c_str()) != 1) {
        error = "TLS certificate '" + pair.cert_path + "' is not a PEM certificate (" +
                openssl_reason() + ")";
        return false;
    }
    BIO* file = BIO_new_file(pair.key_path.c_str(), "r");
    EVP_PKEY* key = file ? PEM_read_bio_PrivateKey(file, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(file);
    if (!key) {
        error = "TLS key '" + pair.key_path + "' is not a PEM private key (" + openssl_reason() +
                "; encrypted keys are not supported)";
        return false;
    }
    // SSL_CTX_use_PrivateKey checks the key against a certificate of its type;
    // check_private_key catches a key whose type has no certificate at all.
    bool matches =
        SSL_CTX_use_PrivateKey(context, key) == 1 && SSL_CTX_check_private_key(context) == 1;
    ERR_clear_error();
    // A chain whose own certificate is not first loads the wrong leaf (issue 33).
    std::string misordered = matches ? std::string() : misordered_chain(pair.cert_path, key);
    EVP_PKEY_free(key);
    if (!misordered.empty()) {
        error = "TLS key '" + pair.key_path + "': " + misordered;
        return false;
    }
    if (!matches) {
        error =
            "TLS key '" + pair.key_path + "' does not match certificate '" + pair.cert_path + "'";
        return false;
    }
    return true;
}

// load_pair(), its error prefixed with where the pair was configured ("lepus.toml:7:1: ").
bool load_certificate(SSL_CTX* context, const TlsCertificate& pair, std::string& error) {
    if (load_pair(context, pair, error)) return true;
    if (!pair.origin.empty()) error = pair.origin + ": " + error;
    return false;
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void* list_arg) {
    const auto& list = *static_cast<const AlpnList*>(list_arg);
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, out_length, list.names, list.length, offered,
                              offered_length) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; // RFC 7301 §3.2: no_application_protocol
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

// TLS 1.2 keeps the server's cipher order (its list puts AES-GCM with ECDSA
// first, as Mozilla's "intermediate"); a client that will speak TLS 1.3
// chooses among the 1.3 suites itself, all of them strong, so one without AES
// hardware can take ChaCha20. OpenSSL has one switch for both versions, so it
// is cleared per connection here, before versions and ciphers are chosen.
// The ClientHello callback does this and, first, answers an ACME TLS-ALPN-01
// validation (net/tls_alpn_challenge.h).
int on_client_hello(SSL* ssl, int* alert, void* max_version) {
    bool acme_challenge = false;
    if (!answer_tls_alpn_challenge(ssl, acme_challenge)) {
        *alert = SSL_AD_NO_APPLICATION_PROTOCOL;
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (acme_challenge) return SSL_CLIENT_HELLO_SUCCESS;
    if (reinterpret_cast<intptr_t>(max_version) < TLS1_3_VERSION) return SSL_CLIENT_HELLO_SUCCESS;
    const unsigned char* data = nullptr;
    size_t length = 0;
    // supported_versions (RFC 8446 §4.2.1): a length byte, then 2-byte versions.
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_supported_versions, &data, &length) != 1 ||
        length < 1)
        return SSL_CLIENT_HELLO_SUCCESS;
    for (size_t i = 1; i + 1 < length && i + 1 <= data[0]; i += 2)
        if (data[i] == 0x03 && data[i + 1] == 0x04) {
            SSL_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
            break;
        }
    return SSL_CLIENT_HELLO_SUCCESS;
}

// The per-site contexts of a default context, by server name.
struct SniTable {
    std::unordered_map<std::string, SSL_CTX*> exact;
    std::vector<std::pair<std::string, SSL_CTX*>> wildcard; // ".example.com" for "*.example.com"
    std::vector<SSL_CTX*> owned;
    // Names of sites whose certificate is not there yet (ACME, before the first
    // issuance): their handshakes get an alert, not another site's certificate.
    std::vector<std::string> refused;
    bool on_demand = false; // unknown names: the hook, then an alert

    ~SniTable() {
        for (SSL_CTX* context : owned)
            SSL_CTX_free(context);
    }
    SSL_CTX* find(std::string_view name) const {
        std::string lower(name);
        for (char& c : lower)
            if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        if (auto it = exact.find(lower); it != exact.end()) return it->second;
        // "*.example.com" covers exactly one more label (RFC 6125 §6.4.3).
        size_t dot = lower.find('.');
        if (dot == std::string::npos || dot == 0) return nullptr;
        std::string_view parent = std::string_view(lower).substr(dot);
        for (const auto& [suffix, context] : wildcard)
            if (parent == suffix) return context;
        return nullptr;
    }
};

void free_sni_table(void*, void* table, CRYPTO_EX_DATA*, int, long, void*) {
    delete static_cast<SniTable*>(table);
}

int sni_index() {
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_sni_table);
    return index;
}

std::atomic<UnknownNameHook> unknown_name_hook{nullptr};

int select_certificate(SSL* ssl, int* alert, void*) {
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!name) return SSL_TLSEXT_ERR_OK; // no SNI: the default certificate
    // The table hangs off the context the connection was made from.
    auto* table =
        static_cast<const SniTable*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), sni_index()));
    if (!table) return SSL_TLSEXT_ERR_OK;
    if (SSL_CTX* site = table->find(name)) {
        SSL_set_SSL_CTX(ssl, site);
        return SSL_TLSEXT_ERR_OK;
    }
    if (!table->refused.empty()) {
        std::string lower(name);
        for (char& c : lower)
            if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        if (std::find(table->refused.begin(), table->refused.end(), lower) !=
            table->refused.end()) {
            *alert = SSL_AD_UNRECOGNIZED_NAME; // RFC 6066 §3
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
    }
    if (table->on_demand) {
        // Not issued yet: this handshake fails, the ACME thread asks and orders,
        // and a later one gets the certificate (a reactor cannot wait for a CA).
        if (UnknownNameHook hook = unknown_name_hook.load(std::memory_order_acquire)) hook(name);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK; // an unknown name gets the default, as nginx does
}

// A context with every setting but the certificates.
SSL_CTX* make_context(const TlsSettings& settings, std::string& error) {
    int min_version = 0, max_version = 0;
    if (!parse_tls_protocols(settings.protocols, min_version, max_version)) {
        error = "TLS protocols '" + settings.protocols + "': use TLSv1.2 and/or TLSv1.3";
        return nullptr;
    }
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    if (!context) {
        error = "cannot create a TLS context: " + openssl_reason();
        return nullptr;
    }
    SSL_CTX_set_min_proto_version(context, min_version);
    SSL_CTX_set_max_proto_version(context, max_version);
    // No renegotiation (a DoS lever, gone in 1.3); an EOF without close_notify
    // is a normal end for HTTP/1.1 clients, not an error (RFC 9112 §9.8).
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                     SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (settings.ktls) SSL_CTX_set_options(context, SSL_OP_ENABLE_KTLS);
    // OpenSSL's callback argument is a pointer: the version travels in it.
    SSL_CTX_set_client_hello_cb(context, on_client_hello,
                                // NOLINTNEXTLINE(performance-no-int-to-ptr)
                                reinterpret_cast<void*>(intptr_t(max_version)));
    // RELEASE_BUFFERS: an idle connection gives its 34 KiB of record buffers
    // back. (No write is ever retried: the transport gathers records in a
    // BIO that takes everything.)
    SSL_CTX_set_mode(context, SSL_MODE_RELEASE_BUFFERS);
    // Read what the socket has in one read(), not a record header at a time.
    SSL_CTX_set_read_ahead(context, 1);
    if (SSL_CTX_set_cipher_list(context, settings.ciphers.c_str()) != 1 ||
        (!settings.ciphersuites.empty() &&
         SSL_CTX_set_ciphersuites(context, settings.ciphersuites.c_str()) != 1)) {
        error = "TLS ciphers: none of '" + settings.ciphers + settings.ciphersuites +
                "' is usable (" + openssl_reason() + ")";
        SSL_CTX_free(context);
        return nullptr;
    }
    SSL_CTX_set1_groups_list(context, "X25519:P-256:P-384");
    // Stateless tickets only: no session cache to lock or to grow.
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_session_id_context(context, reinterpret_cast<const unsigned char*>("lepus"), 5);
    SSL_CTX_set_timeout(context, long(2 * TicketKeyring::kRotationMs / 1000));
    SSL_CTX_set_num_tickets(context, 1);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(context, TicketKeyring::on_ticket);
    SSL_CTX_set_alpn_select_cb(context, select_alpn,
                               const_cast<AlpnList*>(settings.http2 ? &kWithH2 : &kHttp11Only));
    return context;
}

SSL_CTX* make_context_with(const TlsSettings& settings,
                           const std::vector<TlsCertificate>& certificates, std::string& error) {
    SSL_CTX* context = make_context(settings, error);
    if (!context) return nullptr;
    for (const TlsCertificate& pair : certificates)
        if (!load_certificate(context, pair, error)) {
            SSL_CTX_free(context);
            return nullptr;
        }
    return context;
}

} // namespace

SslContextRef::SslContextRef(const SslContextRef& other) : context_(other.context_) {
    if (context_) SSL_CTX_up_ref(context_);
}

SslContextRef& SslContextRef::operator=(const SslContextRef& other) {
    if (this != &other) *this = SslContextRef(other);
    return *this;
}

SslContextRef& SslContextRef::operator=(SslContextRef&& other) noexcept {
    if (this != &other) {
        SSL_CTX_free(context_);
        context_ = other.release();
    }
    return *this;
}

SslContextRef::~SslContextRef() {
    SSL_CTX_free(context_);
}

bool kernel_offers_ktls() {
    // Attaching the `tls` ULP to a socket that is not connected loads the
    // module if it exists and then fails with ENOTCONN; a kernel without it
    // says ENOENT (and one older than TCP_ULP, ENOPROTOOPT). No connection
    // is needed to ask, and nothing is left attached.
    static const bool offered = [] {
        UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!probe) return false;
        return ::setsockopt(probe.get(), IPPROTO_TCP, TCP_ULP, "tls", 3) == 0 ||
               (errno != ENOENT && errno != ENOPROTOOPT);
    }();
    return offered;
}

bool parse_tls_protocols(std::string_view text, int& min_version, int& max_version) {
    min_version = max_version = 0;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find_first_of(" ,", at);
        if (end == std::string_view::npos) end = text.size();
        std::string_view word = text.substr(at, end - at);
        at = end + 1;
        if (word.empty()) continue;
        int version = word == "TLSv1.2" ? TLS1_2_VERSION : word == "TLSv1.3" ? TLS1_3_VERSION : 0;
        if (version == 0) return false;
        if (min_version == 0 || version < min_version) min_version = version;
        if (version > max_version) max_version = version;
    }
    return min_version != 0;
}

SslContextRef build_tls_context(const TlsSettings& settings, std::string& error) {
    if (settings.default_certificates.empty() && settings.sites.empty() && !settings.on_demand) {
        error = "a TLS listener needs a certificate: --tls-cert and --tls-key";
        return {};
    }
    TicketKeyring::process().rotate_if_due(monotonic_ms()); // the first keys, before any handshake
    SslContextRef context(make_context_with(settings, settings.default_certificates, error));
    if (!context) return {};
    auto table = std::make_unique<SniTable>();
    for (const TlsSite& site : settings.sites) {
        if (site.certificates.empty()) { // an ACME site before its first certificate
            for (std::string name : site.names) {
                for (char& c : name)
                    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
                table->refused.push_back(name);
            }
            continue;
        }
        SSL_CTX* site_context = make_context_with(settings, site.certificates, error);
        if (!site_context) return {};
        table->owned.push_back(site_context);
        for (std::string name : site.names) {
            for (char& c : name)
                if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
            if (name.starts_with("*."))
                table->wildcard.emplace_back(name.substr(1), site_context);
            else
                table->exact.emplace(name, site_context); // the first site naming it wins
        }
    }
    table->on_demand = settings.on_demand;
    SSL_CTX_set_tlsext_servername_callback(context.get(), select_certificate);
    SSL_CTX_set_ex_data(context.get(), sni_index(), table.release());
    size_tls_memory(context.get()); // the first context sizes the SSL objects' slots
    return context;
}

void set_unknown_name_hook(UnknownNameHook hook) {
    unknown_name_hook.store(hook, std::memory_order_release);
}

// --- TicketKeyring ---

TicketKeyring& TicketKeyring::process() {
    static TicketKeyring keyring;
    return keyring;
}

bool TicketKeyring::rotate_if_due(uint64_t now_ms) {
    std::lock_guard lock(rotate_mutex_);
    if (owned_current_ && now_ms - rotated_ms_ < kRotationMs) return false;
    auto next = std::make_unique<KeySet>();
    Key& fresh = next->keys[0];
    if (RAND_bytes(fresh.name, sizeof fresh.name) != 1 ||
        RAND_bytes(fresh.aes, sizeof fresh.aes) != 1 ||
        RAND_bytes(fresh.hmac, sizeof fresh.hmac) != 1)
        return false; // keep the old keys; tried again at the next tick
    next->count = 1;
    if (owned_current_)
        for (size_t i = 0; i < owned_current_->count && next->count < kKeysKept; ++i)
            next->keys[next->count++] = owned_current_->keys[i];
    current_.store(next.get(), std::memory_order_release);
    if (owned_current_) retired_.push_back(std::move(owned_current_));
    if (retired_.size() > 2) retired_.erase(retired_.begin());
    owned_current_ = std::move(next);
    rotated_ms_ = now_ms;
    return true;
}

// RFC 5077 §4's recommended ticket protection, as nginx's
// ngx_ssl_ticket_key_callback: 1 = use this key, 2 = decrypted with an old
// key (OpenSSL issues a fresh ticket), 0 = unknown key (full handshake).
int TicketKeyring::on_ticket(SSL*, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                             EVP_MAC_CTX* mac, int encrypt) {
    static EVP_CIPHER* aes = EVP_CIPHER_fetch(nullptr, "AES-256-CBC", nullptr);
    const KeySet* keys = process().current_.load(std::memory_order_acquire);
    if (!keys || keys->count == 0 || !aes) return encrypt ? -1 : 0;
    size_t index = 0;
    if (encrypt) {
        std::memcpy(name, keys->keys[0].name, 16);
        if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(aes)) != 1) return -1;
    } else {
        while (index < keys->count && std::memcmp(name, keys->keys[index].name, 16) != 0)
            ++index;
        if (index == keys->count) return 0;
    }
    const Key& key = keys->keys[index];
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY,
                                                             const_cast<unsigned char*>(key.hmac),
                                                             sizeof key.hmac),
                           OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
    int ok = encrypt ? EVP_EncryptInit_ex(cipher, aes, nullptr, key.aes, iv)
                     : EVP_DecryptInit_ex(cipher, aes, nullptr, key.aes, iv);
    if (ok != 1) return -1;
    return encrypt || index == 0 ? 1 : 2;
}

// --- TlsContextSlot ---

TlsContextSlot& TlsContextSlot::process() {
    static TlsContextSlot slot;
    return slot;
}

void TlsContextSlot::publish(SslContextRef context) {
    std::lock_guard lock(mutex_);
    published_ = std::move(context);
    generation_.fetch_add(1, std::memory_order_release);
}

SSL_CTX* TlsContextSlot::current() {
    struct Cached {
        uint64_t generation = 0;
        SslContextRef context;
    };
    static thread_local Cached cached;
    uint64_t generation = generation_.load(std::memory_order_acquire);
    if (generation != cached.generation) {
        std::lock_guard lock(mutex_); // once per reactor per reload
        cached.context = published_;
        cached.generation = generation_.load(std::memory_order_relaxed);
    }
    return cached.context.get();
}

} // namespace lepus
