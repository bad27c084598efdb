#include "acme/keys.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

namespace lepus::acme {
namespace {

struct BioFree {
    void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string bio_text(BIO* bio) {
    char* data = nullptr;
    long length = BIO_get_mem_data(bio, &data);
    return length > 0 ? std::string(data, size_t(length)) : std::string();
}

// A 32-byte big-endian coordinate or signature half (RFC 7518 §3.4, §6.2.1.2).
std::string fixed_32(const BIGNUM* number) {
    unsigned char bytes[32];
    if (BN_bn2binpad(number, bytes, sizeof bytes) != sizeof bytes) return {};
    return {reinterpret_cast<char*>(bytes), sizeof bytes};
}

std::string coordinate(EVP_PKEY* key, const char* which) {
    BIGNUM* number = nullptr;
    if (EVP_PKEY_get_bn_param(key, which, &number) != 1) return {};
    std::string bytes = fixed_32(number);
    BN_free(number);
    return bytes;
}

// subjectAltName with a dNSName per name (RFC 5280 §4.2.1.6).
X509_EXTENSION* alt_names(const std::vector<std::string>& names) {
    GENERAL_NAMES* general = GENERAL_NAMES_new();
    for (const std::string& name : names) {
        GENERAL_NAME* entry = GENERAL_NAME_new();
        ASN1_IA5STRING* text = ASN1_IA5STRING_new();
        ASN1_STRING_set(text, name.data(), int(name.size()));
        GENERAL_NAME_set0_value(entry, GEN_DNS, text);
        sk_GENERAL_NAME_push(general, entry);
    }
    X509_EXTENSION* extension = X509V3_EXT_i2d(NID_subject_alt_name, 0, general);
    GENERAL_NAMES_free(general);
    return extension;
}

bool set_common_name(X509_NAME* subject, const std::string& name) {
    // RFC 5280's ub-common-name is 64; a longer name lives in the SAN alone.
    if (name.size() > 64) return true;
    return X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                      reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1,
                                      0) == 1;
}

} // namespace

std::string base64url(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int length =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                        reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
    out.resize(size_t(length));
    while (!out.empty() && out.back() == '=')
        out.pop_back();
    for (char& c : out)
        c = c == '+' ? '-' : c == '/' ? '_' : c;
    return out;
}

std::string sha256(std::string_view bytes) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
    return {reinterpret_cast<char*>(digest), sizeof digest};
}

EvpKey generate_p256_key() {
    return EvpKey(EVP_EC_gen("P-256"));
}

std::string private_key_pem(EVP_PKEY* key) {
    BioPtr bio(BIO_new(BIO_s_mem()));
    if (!bio ||
        PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
        return {};
    return bio_text(bio.get());
}

EvpKey private_key_from_pem(std::string_view pem) {
    BioPtr bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
    return EvpKey(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

std::string jwk_json(EVP_PKEY* key) {
    return R"({"crv":"P-256","kty":"EC","x":")" +
           base64url(coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X)) + R"(","y":")" +
           base64url(coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y)) + R"("})";
}

std::string jwk_thumbprint(EVP_PKEY* key) {
    return base64url(sha256(jwk_json(key)));
}

std::string sign_es256(EVP_PKEY* key, std::string_view input) {
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    size_t length = 0;
    std::string der;
    if (context && EVP_DigestSignInit(context, nullptr, EVP_sha256(), nullptr, key) == 1 &&
        EVP_DigestSign(context, nullptr, &length,
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1) {
        der.resize(length);
        if (EVP_DigestSign(context, reinterpret_cast<unsigned char*>(der.data()), &length,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1)
            der.resize(length);
        else
            der.clear();
    }
    EVP_MD_CTX_free(context);
    const auto* at = reinterpret_cast<const unsigned char*>(der.data());
    ECDSA_SIG* signature = der.empty() ? nullptr : d2i_ECDSA_SIG(nullptr, &at, long(der.size()));
    if (!signature) return {};
    std::string raw = fixed_32(ECDSA_SIG_get0_r(signature)) + fixed_32(ECDSA_SIG_get0_s(signature));
    ECDSA_SIG_free(signature);
    return raw.size() == 64 ? raw : std::string();
}

std::string make_jws(EVP_PKEY* key, std::string_view kid, std::string_view nonce,
                     std::string_view url, std::string_view payload) {
    // The strings are URLs and base64url nonces the CA gave: JSON-safe as they
    // are, but escaped anyway for '"' and '\\' so no CA text can break out.
    auto quoted = [](std::string_view text) {
        std::string out = "\"";
        for (char c : text) {
            if (c == '"' || c == '\\') out += '\\';
            if (static_cast<unsigned char>(c) >= 0x20) out += c;
        }
        return out + "\"";
    };
    std::string header = R"({"alg":"ES256",)";
    header += kid.empty() ? R"("jwk":)" + jwk_json(key) : R"("kid":)" + quoted(kid);
    header += R"(,"nonce":)" + quoted(nonce) + R"(,"url":)" + quoted(url) + "}";
    std::string protected_part = base64url(header);
    std::string payload_part = base64url(payload);
    std::string signature = sign_es256(key, protected_part + "." + payload_part);
    return R"({"protected":")" + protected_part + R"(","payload":")" + payload_part +
           R"(","signature":")" + base64url(signature) + R"("})";
}

std::string make_csr_der(EVP_PKEY* key, const std::vector<std::string>& names) {
    if (names.empty()) return {};
    X509_REQ* request = X509_REQ_new();
    std::string der;
    STACK_OF(X509_EXTENSION)* extensions = sk_X509_EXTENSION_new_null();
    X509_EXTENSION* san = extensions ? alt_names(names) : nullptr;
    if (san && sk_X509_EXTENSION_push(extensions, san) <= 0) { // else the stack owns it
        X509_EXTENSION_free(san);
        san = nullptr;
    }
    if (request && san && X509_REQ_set_version(request, 0) == 1 &&
        set_common_name(X509_REQ_get_subject_name(request), names.front()) &&
        X509_REQ_set_pubkey(request, key) == 1 &&
        X509_REQ_add_extensions(request, extensions) == 1 &&
        X509_REQ_sign(request, key, EVP_sha256()) > 0) {
        int length = i2d_X509_REQ(request, nullptr);
        der.resize(size_t(std::max(length, 0)));
        auto* out = reinterpret_cast<unsigned char*>(der.data());
        if (length <= 0 || i2d_X509_REQ(request, &out) != length) der.clear();
    }
    sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
    X509_REQ_free(request);
    return der;
}

X509Ptr make_tls_alpn_certificate(EVP_PKEY* key, const std::string& name,
                                  std::string_view key_authorization) {
    X509Ptr certificate(X509_new());
    if (!certificate) return nullptr;
    X509* x = certificate.get();
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f; // a positive INTEGER
    BIGNUM* serial_number = BN_bin2bn(serial, sizeof serial, nullptr);
    bool ok = X509_set_version(x, X509_VERSION_3) == 1 && serial_number &&
              BN_to_ASN1_INTEGER(serial_number, X509_get_serialNumber(x)) &&
              X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
              X509_gmtime_adj(X509_getm_notAfter(x), 7L * 24 * 3600) &&
              set_common_name(X509_get_subject_name(x), name) &&
              X509_set_issuer_name(x, X509_get_subject_name(x)) == 1 &&
              X509_set_pubkey(x, key) == 1;
    BN_free(serial_number);
    if (X509_EXTENSION* san = ok ? alt_names({name}) : nullptr) {
        ok = X509_add_ext(x, san, -1) == 1;
        X509_EXTENSION_free(san);
    } else {
        ok = false;
    }
    // RFC 8737 §3: extnValue is the DER of an OCTET STRING holding the digest.
    std::string digest = sha256(key_authorization);
    ASN1_OCTET_STRING* inner = ASN1_OCTET_STRING_new();
    ASN1_OCTET_STRING* outer = ASN1_OCTET_STRING_new();
    ASN1_OBJECT* acme_identifier = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    unsigned char* der = nullptr;
    int der_length = -1;
    if (ok && inner && outer && acme_identifier &&
        ASN1_OCTET_STRING_set(inner, reinterpret_cast<const unsigned char*>(digest.data()),
                              int(digest.size())) == 1 &&
        (der_length = i2d_ASN1_OCTET_STRING(inner, &der)) > 0 &&
        ASN1_OCTET_STRING_set(outer, der, der_length) == 1) {
        X509_EXTENSION* extension =
            X509_EXTENSION_create_by_OBJ(nullptr, acme_identifier, 1, outer);
        ok = extension && X509_add_ext(x, extension, -1) == 1;
        X509_EXTENSION_free(extension);
    } else {
        ok = false;
    }
    OPENSSL_free(der);
    ASN1_OBJECT_free(acme_identifier);
    ASN1_OCTET_STRING_free(inner);
    ASN1_OCTET_STRING_free(outer);
    if (!ok || X509_sign(x, key, EVP_sha256()) <= 0) return nullptr;
    return certificate;
}

std::optional<Validity> certificate_validity(std::string_view pem) {
    BioPtr bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
    X509Ptr certificate(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    if (!certificate) return std::nullopt;
    tm before{}, after{};
    if (ASN1_TIME_to_tm(X509_get0_notBefore(certificate.get()), &before) != 1 ||
        ASN1_TIME_to_tm(X509_get0_notAfter(certificate.get()), &after) != 1)
        return std::nullopt;
    return Validity{timegm(&before), timegm(&after)};
}

} // namespace lepus::acme
