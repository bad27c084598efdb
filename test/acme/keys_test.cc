#include "acme/keys.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace lepus::acme {
namespace {

using json = nlohmann::json;

std::string base64url_decode(std::string text) {
    for (char& c : text)
        c = c == '-' ? '+' : c == '_' ? '/' : c;
    while (text.size() % 4)
        text += '=';
    std::string out(text.size(), '\0');
    int length =
        EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                        reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
    if (length < 0) return {};
    out.resize(size_t(length) - (text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0));
    return out;
}

// Verifies a raw r||s ES256 signature the way a CA does: back to DER, then ECDSA.
bool verify_es256(EVP_PKEY* key, std::string_view input, const std::string& raw) {
    if (raw.size() != 64) return false;
    ECDSA_SIG* signature = ECDSA_SIG_new();
    ECDSA_SIG_set0(signature,
                   BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr),
                   BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr));
    unsigned char* der = nullptr;
    int der_length = i2d_ECDSA_SIG(signature, &der);
    ECDSA_SIG_free(signature);
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    bool ok =
        EVP_DigestVerifyInit(context, nullptr, EVP_sha256(), nullptr, key) == 1 &&
        EVP_DigestVerify(context, der, size_t(der_length),
                         reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
    EVP_MD_CTX_free(context);
    OPENSSL_free(der);
    return ok;
}

TEST(Base64Url, NoPaddingAndUrlAlphabet) {
    EXPECT_EQ(base64url(""), "");
    EXPECT_EQ(base64url("f"), "Zg");
    EXPECT_EQ(base64url("fo"), "Zm8");
    EXPECT_EQ(base64url("foo"), "Zm9v");
    EXPECT_EQ(base64url("\xfb\xff"), "-_8");
    // RFC 7515 §A.3.1's protected header {"alg":"ES256"}.
    EXPECT_EQ(base64url(R"({"alg":"ES256"})"), "eyJhbGciOiJFUzI1NiJ9");
}

TEST(AccountKey, PemRoundTripKeepsTheKey) {
    EvpKey key = generate_p256_key();
    ASSERT_TRUE(key);
    std::string pem = private_key_pem(key.get());
    EXPECT_NE(pem.find("BEGIN PRIVATE KEY"), std::string::npos);
    EvpKey again = private_key_from_pem(pem);
    ASSERT_TRUE(again);
    EXPECT_EQ(jwk_json(key.get()), jwk_json(again.get()));
    EXPECT_FALSE(private_key_from_pem("not a key"));
}

TEST(Jwk, MembersInLexicographicOrderAndThumbprintIsItsDigest) {
    EvpKey key = generate_p256_key();
    std::string text = jwk_json(key.get());
    json jwk = json::parse(text);
    EXPECT_EQ(text.find(R"({"crv":"P-256","kty":"EC","x":")"), 0u); // RFC 7638 §3.2
    EXPECT_EQ(jwk["x"].get<std::string>().size(), 43u);             // 32 bytes, unpadded
    EXPECT_EQ(base64url_decode(jwk["y"].get<std::string>()).size(), 32u);
    EXPECT_EQ(jwk_thumbprint(key.get()), base64url(sha256(text)));
    EXPECT_EQ(jwk_thumbprint(key.get()).size(), 43u);
}

TEST(Es256, RawSignatureVerifies) {
    EvpKey key = generate_p256_key();
    std::string signature = sign_es256(key.get(), "payload");
    EXPECT_EQ(signature.size(), 64u); // r||s, not DER (RFC 7518 §3.4)
    EXPECT_TRUE(verify_es256(key.get(), "payload", signature));
    EXPECT_FALSE(verify_es256(key.get(), "other payload", signature));
    EvpKey other = generate_p256_key();
    EXPECT_FALSE(verify_es256(other.get(), "payload", signature));
}

TEST(Jws, NewAccountCarriesJwkAndTheRestKid) {
    EvpKey key = generate_p256_key();
    std::string text = make_jws(key.get(), "", "nonce-1", "https://ca/new-acct", R"({"a":1})");
    json jws = json::parse(text);
    json header = json::parse(base64url_decode(jws["protected"].get<std::string>()));
    EXPECT_EQ(header["alg"], "ES256");
    EXPECT_EQ(header["nonce"], "nonce-1");
    EXPECT_EQ(header["url"], "https://ca/new-acct");
    EXPECT_EQ(header["jwk"], json::parse(jwk_json(key.get())));
    EXPECT_FALSE(header.contains("kid"));
    EXPECT_EQ(base64url_decode(jws["payload"].get<std::string>()), R"({"a":1})");
    std::string signed_input =
        jws["protected"].get<std::string>() + "." + jws["payload"].get<std::string>();
    EXPECT_TRUE(verify_es256(key.get(), signed_input,
                             base64url_decode(jws["signature"].get<std::string>())));

    json get = json::parse(make_jws(key.get(), "https://ca/acct/7", "n2", "https://ca/o/1", ""));
    json get_header = json::parse(base64url_decode(get["protected"].get<std::string>()));
    EXPECT_EQ(get_header["kid"], "https://ca/acct/7");
    EXPECT_FALSE(get_header.contains("jwk"));
    EXPECT_EQ(get["payload"], ""); // POST-as-GET (RFC 8555 §6.3)
}

TEST(Jws, QuotesInCaTextCannotBreakTheHeader) {
    EvpKey key = generate_p256_key();
    json jws = json::parse(make_jws(key.get(), "k\"id", "n\\o", "https://ca/\"x", ""));
    json header = json::parse(base64url_decode(jws["protected"].get<std::string>()));
    EXPECT_EQ(header["kid"], "k\"id");
    EXPECT_EQ(header["nonce"], "n\\o");
}

std::vector<std::string> alt_dns_names(const STACK_OF(GENERAL_NAME) * names) {
    std::vector<std::string> out;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
        if (name->type == GEN_DNS)
            out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.dNSName)),
                             size_t(ASN1_STRING_length(name->d.dNSName)));
    }
    return out;
}

TEST(Csr, SignedByTheKeyWithEveryNameInTheSan) {
    EvpKey key = generate_p256_key();
    std::string der = make_csr_der(key.get(), {"example.org", "www.example.org"});
    ASSERT_FALSE(der.empty());
    const auto* at = reinterpret_cast<const unsigned char*>(der.data());
    X509_REQ* request = d2i_X509_REQ(nullptr, &at, long(der.size()));
    ASSERT_NE(request, nullptr);
    EXPECT_EQ(X509_REQ_verify(request, key.get()), 1);
    STACK_OF(X509_EXTENSION)* extensions = X509_REQ_get_extensions(request);
    auto* names = static_cast<STACK_OF(GENERAL_NAME)*>(
        X509V3_get_d2i(extensions, NID_subject_alt_name, nullptr, nullptr));
    ASSERT_NE(names, nullptr);
    EXPECT_EQ(alt_dns_names(names), (std::vector<std::string>{"example.org", "www.example.org"}));
    char common_name[256] = {};
    X509_NAME_get_text_by_NID(X509_REQ_get_subject_name(request), NID_commonName, common_name,
                              sizeof common_name);
    EXPECT_STREQ(common_name, "example.org");
    GENERAL_NAMES_free(names);
    sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
    X509_REQ_free(request);
    EXPECT_TRUE(make_csr_der(key.get(), {}).empty());
}

TEST(TlsAlpnCertificate, CarriesTheCriticalAcmeIdentifierDigest) {
    EvpKey key = generate_p256_key();
    X509Ptr certificate = make_tls_alpn_certificate(key.get(), "example.org", "token.thumb");
    ASSERT_TRUE(certificate);
    EXPECT_EQ(X509_verify(certificate.get(), key.get()), 1); // self-signed
    auto* names = static_cast<STACK_OF(GENERAL_NAME)*>(
        X509_get_ext_d2i(certificate.get(), NID_subject_alt_name, nullptr, nullptr));
    ASSERT_NE(names, nullptr);
    EXPECT_EQ(alt_dns_names(names), std::vector<std::string>{"example.org"});
    GENERAL_NAMES_free(names);
    ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    int index = X509_get_ext_by_OBJ(certificate.get(), oid, -1);
    ASN1_OBJECT_free(oid);
    ASSERT_GE(index, 0);
    X509_EXTENSION* extension = X509_get_ext(certificate.get(), index);
    EXPECT_EQ(X509_EXTENSION_get_critical(extension), 1); // RFC 8737 §3
    const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(extension);
    std::string der(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                    size_t(ASN1_STRING_length(value)));
    EXPECT_EQ(der, std::string("\x04\x20", 2) + sha256("token.thumb"));
}

TEST(CertificateValidity, ReadsTheFirstCertificateOfAChain) {
    EvpKey key = generate_p256_key();
    X509Ptr certificate = make_tls_alpn_certificate(key.get(), "example.org", "x");
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, certificate.get());
    char* data = nullptr;
    std::string pem(data, size_t(BIO_get_mem_data(bio, &data)));
    BIO_free(bio);
    auto validity = certificate_validity(pem + pem);
    ASSERT_TRUE(validity);
    EXPECT_EQ(validity->not_after - validity->not_before, 7 * 24 * 3600 + 3600);
    EXPECT_FALSE(certificate_validity("no certificate here"));
}

} // namespace
} // namespace lepus::acme
