// One ACME conversation (RFC 8555): the directory, nonces (a badNonce answer
// is retried with the fresh nonce it carries, §6.5), the account (found again
// by its key, §7.3.1), an order for a set of names, one challenge per
// authorization answered by lepus itself (HTTP-01 or TLS-ALPN-01), finalize
// with a CSR for a new P-256 key, and the chain downloaded. Blocking: it runs
// on the ACME thread (acme/manager.h), never on a reactor.
#pragma once

#include "acme/http_client.h"

#include <functional>
#include <openssl/evp.h>
#include <string>
#include <vector>

namespace lepus::acme {

enum class ChallengeType { Http01, TlsAlpn01 };

// Why an order failed, from the CA's problem document (RFC 8555 §6.7) where
// it sent one.
struct AcmeError {
    std::string step;   // "newOrder", "validation of example.org (http-01)", ...
    long status = 0;    // HTTP status; 0: no answer
    std::string type;   // "urn:ietf:params:acme:error:rateLimited"
    std::string detail; // the CA's words, or curl's
    long retry_after_s = 0;
    // One line: step, status, type and detail.
    std::string text() const;
};

struct IssuedCertificate {
    std::string chain_pem; // the leaf first, then the intermediates
    std::string key_pem;
};

class AcmeClient {
public:
    AcmeClient(HttpClient& http, EVP_PKEY* account_key, std::string directory_url,
               std::string email);

    // Orders a certificate for `names`, answering the first challenge type of
    // `types` each authorization offers. `stopping` is asked while polling.
    // False with `error` set when it fails.
    bool issue(const std::vector<std::string>& names, const std::vector<ChallengeType>& types,
               const std::function<bool()>& stopping, IssuedCertificate& out, AcmeError& error);

private:
    struct Reply;
    void load_directory();
    void fresh_nonce();
    Reply post(const std::string& url, const std::string& payload, const std::string& step);
    void register_account();
    void authorize(const std::string& url, const std::vector<ChallengeType>& types,
                   const std::function<bool()>& stopping);
    void run_order(const std::vector<std::string>& names, const std::vector<ChallengeType>& types,
                   const std::function<bool()>& stopping, IssuedCertificate& out);

    HttpClient& http_;
    EVP_PKEY* account_key_;
    std::string directory_url_, email_;
    std::string new_nonce_, new_account_, new_order_;
    std::string nonce_, kid_;
};

} // namespace lepus::acme
