#include "net/certificate_check.h"

#include <memory>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace lepus {
namespace {

struct X509Free {
    void operator()(X509* certificate) const { X509_free(certificate); }
};
using X509Ref = std::unique_ptr<X509, X509Free>;

// The certificates of a PEM file, in the file's order.
std::vector<X509Ref> read_chain(const std::string& path) {
    std::vector<X509Ref> chain;
    BIO* file = BIO_new_file(path.c_str(), "r");
    if (!file) {
        ERR_clear_error();
        return chain;
    }
    while (X509* certificate = PEM_read_bio_X509(file, nullptr, nullptr, nullptr))
        chain.emplace_back(certificate);
    BIO_free(file);
    ERR_clear_error(); // the end of the file reads as an error
    return chain;
}

std::string subject(const X509* certificate) {
    char text[256];
    X509_NAME_oneline(X509_get_subject_name(certificate), text, sizeof text);
    return text;
}

std::string date(const ASN1_TIME* time) {
    std::tm parts{};
    if (ASN1_TIME_to_tm(time, &parts) != 1) return "?";
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &parts);
    return text;
}

// RFC 6125 §6.4.3: "*.example.org" is covered by a certificate for that
// wildcard; any name of one label below it stands for all of them.
bool covers(X509* certificate, const std::string& name) {
    std::string host = name.starts_with("*.") ? "lepus-check" + name.substr(1) : name;
    return X509_check_host(certificate, host.data(), host.size(), 0, nullptr) == 1;
}

} // namespace

std::vector<std::string> certificate_warnings(const std::string& cert_path,
                                              const std::vector<std::string>& names, time_t now) {
    std::vector<std::string> warnings;
    std::vector<X509Ref> chain = read_chain(cert_path);
    if (chain.empty()) return warnings;
    X509* leaf = chain.front().get();
    const std::string what = "TLS certificate '" + cert_path + "' (" + subject(leaf) + ")";
    // Out of order, the first certificate may be an issuer's: its dates and
    // names are not the site's, so the order is the one thing to say.
    for (size_t i = 1; i < chain.size(); ++i)
        if (X509_check_issued(chain[i].get(), chain[i - 1].get()) != X509_V_OK) {
            warnings.push_back(what + ": certificate " + std::to_string(i + 1) + " (" +
                               subject(chain[i].get()) + ") did not issue certificate " +
                               std::to_string(i) + " (" + subject(chain[i - 1].get()) +
                               "): the chain is in the wrong order or incomplete (the site's "
                               "certificate first, then each issuer, as fullchain.pem)");
            return warnings;
        }
    if (X509_cmp_time(X509_get0_notAfter(leaf), &now) < 0)
        warnings.push_back(what + " expired on " + date(X509_get0_notAfter(leaf)) +
                           ": clients will refuse it");
    else if (X509_cmp_time(X509_get0_notBefore(leaf), &now) > 0)
        warnings.push_back(what + " is not valid before " + date(X509_get0_notBefore(leaf)));
    for (const std::string& name : names) {
        if (covers(leaf, name)) continue;
        std::string& warning = warnings.emplace_back(what);
        warning.append(" does not cover the server name '").append(name);
        warning.append("': clients asking for it will refuse the certificate");
    }
    return warnings;
}

std::string misordered_chain(const std::string& cert_path, EVP_PKEY* key) {
    std::vector<X509Ref> chain = read_chain(cert_path);
    for (size_t i = 1; i < chain.size(); ++i)
        if (X509_check_private_key(chain[i].get(), key) == 1) {
            ERR_clear_error();
            return "the certificate of this key is number " + std::to_string(i + 1) + " in '" +
                   cert_path + "', after " + subject(chain[0].get()) +
                   ": the chain is in the wrong order (the site's certificate first, then "
                   "its issuers, as fullchain.pem)";
        }
    ERR_clear_error();
    return {};
}

} // namespace lepus
