// The one certificate helper of the C++ TLS tests: a self-signed P-256
// certificate and its key, made at test time in memory (the e2e tests make
// theirs with `openssl req`). Write them out with PEM_write_* where a test
// needs files.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

namespace lepus::test {

class SelfSignedCertificate {
public:
    // Valid from now for an hour, for `common_name` (also the issuer's name).
    explicit SelfSignedCertificate(const char* common_name)
        : key_(EVP_EC_gen("P-256")), certificate_(X509_new()) {
        ASN1_INTEGER_set(X509_get_serialNumber(certificate_), 1);
        X509_gmtime_adj(X509_getm_notBefore(certificate_), 0);
        X509_gmtime_adj(X509_getm_notAfter(certificate_), 3600);
        X509_set_pubkey(certificate_, key_);
        X509_NAME* name = X509_get_subject_name(certificate_);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
        X509_set_issuer_name(certificate_, name);
        X509_sign(certificate_, key_, EVP_sha256());
    }
    ~SelfSignedCertificate() {
        X509_free(certificate_);
        EVP_PKEY_free(key_);
    }
    SelfSignedCertificate(const SelfSignedCertificate&) = delete;
    SelfSignedCertificate& operator=(const SelfSignedCertificate&) = delete;

    EVP_PKEY* key() const { return key_; }
    X509* certificate() const { return certificate_; }

private:
    EVP_PKEY* key_;
    X509* certificate_;
};

} // namespace lepus::test
