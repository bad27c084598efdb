// Keys, signatures and certificate requests of the ACME client (OpenSSL 3):
// ECDSA P-256 keys, JWS with ES256 (RFC 7515, RFC 7518 §3.4), the JWK
// thumbprint (RFC 7638), the CSR sent to finalize an order (RFC 8555 §7.4),
// and the TLS-ALPN-01 challenge certificate (RFC 8737 §3).
#pragma once

#include <ctime>
#include <memory>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::acme {

struct EvpKeyFree {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct X509Free {
    void operator()(X509* certificate) const { X509_free(certificate); }
};
using EvpKey = std::unique_ptr<EVP_PKEY, EvpKeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

// RFC 7515 §2 base64url without padding.
std::string base64url(std::string_view bytes);
// SHA-256 of `bytes`, raw.
std::string sha256(std::string_view bytes);

// A new ECDSA P-256 key; null when OpenSSL fails.
EvpKey generate_p256_key();
// PEM (PKCS#8) of a private key, and back (null when it is not one).
std::string private_key_pem(EVP_PKEY* key);
EvpKey private_key_from_pem(std::string_view pem);

// The public JWK of a P-256 key with its members in lexicographic order
// (RFC 7638 §3.2), so the same text serves the JWS header and the thumbprint.
std::string jwk_json(EVP_PKEY* key);
// base64url(SHA-256(jwk_json)): the account's part of a key authorization.
std::string jwk_thumbprint(EVP_PKEY* key);

// ES256 over `input`: the raw 64-byte r||s that RFC 7518 §3.4 asks for (not
// OpenSSL's DER). Empty when signing fails.
std::string sign_es256(EVP_PKEY* key, std::string_view input);

// A flattened JWS JSON object (RFC 8555 §6.2): protected {alg, nonce, url,
// and kid, or jwk when kid is empty}, `payload` as given (empty: POST-as-GET).
std::string make_jws(EVP_PKEY* key, std::string_view kid, std::string_view nonce,
                     std::string_view url, std::string_view payload);

// A DER PKCS#10 request for `names` (subjectAltName dNSNames, the first one as
// CN too), signed with `key`. Empty on failure.
std::string make_csr_der(EVP_PKEY* key, const std::vector<std::string>& names);

// RFC 8737 §3: a self-signed certificate for `name` whose critical
// id-pe-acmeIdentifier extension holds SHA-256(key_authorization).
X509Ptr make_tls_alpn_certificate(EVP_PKEY* key, const std::string& name,
                                  std::string_view key_authorization);

// The validity of the first certificate of a PEM chain; nullopt when unreadable.
struct Validity {
    time_t not_before = 0;
    time_t not_after = 0;
};
std::optional<Validity> certificate_validity(std::string_view pem);

} // namespace lepus::acme
