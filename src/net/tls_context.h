// TLS server contexts (OpenSSL 3): what every TLS connection of the process
// is made from.
//
// build_tls_context() turns TlsSettings into one immutable SSL_CTX: TLS 1.2
// and 1.3 only by default, ECDHE + AEAD ciphers for 1.2 in the server's
// order, the client's order for 1.3 (every 1.3 suite is strong, and a client
// without AES hardware picks ChaCha20), ALPN "http/1.1", tickets for
// resumption, RSA and ECDSA certificates side by side. Per-site certificates live in their own
// SSL_CTXs, chosen by SNI in the servername callback; they are owned by the default context (its
// ex_data), so a connection that holds the default context keeps the whole set alive, and a reload
// simply publishes a new default context.
//
// Session tickets are encrypted with keys shared by every context and reactor
// (TicketKeyring): the key set is immutable and swapped with one atomic store
// when it rotates, so the ticket callback takes no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <openssl/ssl.h>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lepus {

// One certificate (PEM, chain after the leaf) and its private key (PEM).
struct TlsCertificate {
    std::string cert_path;
    std::string key_path;
    std::string origin = {}; // where it was configured ("lepus.toml:7:1"), for messages
};

// The certificates of one site, for the names it serves.
struct TlsSite {
    std::vector<std::string> names;           // "example.com", "*.example.com"
    std::vector<TlsCertificate> certificates; // none: refused with an alert (ACME, not issued yet)
};

struct TlsSettings {
    std::vector<TlsCertificate> default_certificates; // no SNI, or a name no site has
    std::vector<TlsSite> sites;
    std::string protocols = "TLSv1.2 TLSv1.3"; // the lowest and highest are used
    // TLS 1.2 cipher list (OpenSSL syntax): ECDHE key exchange, AEAD only.
    std::string ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                          "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                          "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
    // TLS 1.3 suites; empty: OpenSSL's default (all three are AEAD).
    std::string ciphersuites;
    bool http2 = true; // ALPN offers h2 before http/1.1
    // SSL_OP_ENABLE_KTLS: after the handshake the kernel encrypts what the
    // connection sends (and files go out by SSL_sendfile) when the cipher is
    // one Linux's tls module knows. Set only when kernel_offers_ktls().
    bool ktls = false;
    // On-demand certificates (ACME): a name no site has is refused with an
    // alert and handed to the unknown-name hook, instead of getting the default.
    bool on_demand = false;
};

// The hook of TlsSettings::on_demand: called on a reactor during a handshake
// with a name that has no certificate; must only queue it (no blocking).
using UnknownNameHook = void (*)(std::string_view name);
void set_unknown_name_hook(UnknownNameHook hook);

// Whether this kernel has Linux's `tls` upper-layer protocol (the module is
// loaded, or loads on first use). Asked once; later calls give the same answer.
bool kernel_offers_ktls();

// An owned reference to an SSL_CTX (SSL_CTX_up_ref / SSL_CTX_free).
class SslContextRef {
public:
    SslContextRef() = default;
    explicit SslContextRef(SSL_CTX* adopted) : context_(adopted) {}
    SslContextRef(const SslContextRef& other);
    SslContextRef& operator=(const SslContextRef& other);
    SslContextRef(SslContextRef&& other) noexcept : context_(other.release()) {}
    SslContextRef& operator=(SslContextRef&& other) noexcept;
    ~SslContextRef();

    SSL_CTX* get() const { return context_; }
    explicit operator bool() const { return context_ != nullptr; }
    SSL_CTX* release() { return std::exchange(context_, nullptr); }

private:
    SSL_CTX* context_ = nullptr;
};

// "TLSv1.2 TLSv1.3" -> the protocol versions; false for an unknown name.
bool parse_tls_protocols(std::string_view text, int& min_version, int& max_version);

// Builds the context, loading and matching every certificate and key. On
// failure: an empty reference and one line in `error` naming the file at fault.
SslContextRef build_tls_context(const TlsSettings& settings, std::string& error);

// The session ticket keys of the process: AES-256-CBC + HMAC-SHA256 as
// RFC 5077 §4 suggests, a new key every rotation, the previous ones kept for
// decryption so that tickets stay good for about two rotation periods.
class TicketKeyring {
public:
    static constexpr uint64_t kRotationMs = uint64_t{3600} * 1000;

    // The keyring every context's ticket callback uses.
    static TicketKeyring& process();

    // Makes a fresh key the current one when the last rotation is older than
    // kRotationMs (or there are no keys yet). Main thread; true if it rotated.
    bool rotate_if_due(uint64_t now_ms);
    // Whether TLS is in use: a context was built, so there are keys to rotate.
    bool active() const { return current_.load(std::memory_order_relaxed) != nullptr; }
    // The callback for SSL_CTX_set_tlsext_ticket_key_evp_cb.
    static int on_ticket(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                         EVP_MAC_CTX* mac, int encrypt);

private:
    static constexpr size_t kKeysKept = 3;
    struct Key {
        unsigned char name[16];
        unsigned char aes[32];
        unsigned char hmac[32];
    };
    struct KeySet {
        Key keys[kKeysKept];
        size_t count = 0; // keys[0] encrypts; all decrypt
    };

    std::atomic<const KeySet*> current_{nullptr};
    // Older sets, freed two rotations later: a reader holds a set for the
    // microseconds of one callback, a rotation comes every hour.
    std::vector<std::unique_ptr<KeySet>> retired_;
    std::unique_ptr<KeySet> owned_current_;
    uint64_t rotated_ms_ = 0;
    std::mutex rotate_mutex_;
};

// The TLS context new connections are made from: published by the main thread
// (start-up, SIGHUP), read by every reactor. A reactor keeps its own reference
// and compares one generation number per new connection, so the accept path
// takes no lock; connections in flight keep the context they started with.
class TlsContextSlot {
public:
    // The slot of the process (one set of listeners, one context).
    static TlsContextSlot& process();

    // Any thread: new connections get `context` from now on.
    void publish(SslContextRef context);
    // The current context (null when none was published), for this thread.
    SSL_CTX* current();

private:
    std::mutex mutex_;
    SslContextRef published_;
    std::atomic<uint64_t> generation_{0};
};

} // namespace lepus
