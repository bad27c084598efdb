#include "acme/client.h"

#include "acme/http_challenges.h"
#include "acme/keys.h"
#include "log/error_log.h"
#include "net/tls_alpn_challenge.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

namespace lepus::acme {

using json = nlohmann::json;

// The client throws AcmeError inside this file only (the ACME thread, not a
// request path): each of the dozen steps of an order can fail, and issue()
// turns the first failure into its result.
struct AcmeClient::Reply {
    HttpResponse response;
    json body; // null when the body is not JSON (the certificate chain)
};

namespace {

constexpr int kBadNonceRetries = 20; // PEBBLE_WFE_NONCEREJECT=50 refuses half of them
constexpr int kPolls = 120;

AcmeError problem_of(const HttpResponse& response, const std::string& step) {
    AcmeError error{step, response.status, {}, response.error, 0};
    if (response.status == 0) return error;
    json problem = json::parse(response.body, nullptr, false);
    if (problem.is_object()) {
        error.type = problem.value("type", "");
        error.detail = problem.value("detail", "");
    } else {
        error.detail = response.body.substr(0, 200);
    }
    std::string retry_after = response.header("retry-after");
    if (!retry_after.empty() && retry_after.find_first_not_of("0123456789") == std::string::npos)
        error.retry_after_s = std::stol(retry_after.substr(0, 9));
    return error;
}

std::string challenge_name(ChallengeType type) {
    return type == ChallengeType::Http01 ? "http-01" : "tls-alpn-01";
}

void pause(const std::function<bool()>& stopping, long retry_after_s) {
    // Pebble with PEBBLE_VA_NOSLEEP answers at once; a real CA says Retry-After.
    auto wait =
        std::chrono::milliseconds(retry_after_s > 0 ? std::min(retry_after_s, 10L) * 1000 : 500);
    if (stopping()) throw AcmeError{"stopping", 0, {}, "lepus is stopping", 0};
    std::this_thread::sleep_for(wait);
}

long retry_after_of(const HttpResponse& response) {
    std::string text = response.header("retry-after");
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
    return std::stol(text.substr(0, 9));
}

// The challenge answer published while it is validated, and withdrawn after.
class PublishedChallenge {
public:
    PublishedChallenge(ChallengeType type, const std::string& name, const std::string& token,
                       const std::string& key_authorization)
        : type_(type), name_(name), token_(token) {
        if (type == ChallengeType::Http01) {
            HttpChallenges::process().add(token, key_authorization);
            return;
        }
        EvpKey key = generate_p256_key();
        X509Ptr certificate =
            key ? make_tls_alpn_certificate(key.get(), name, key_authorization) : nullptr;
        std::string error;
        SslContextRef context =
            certificate ? make_tls_alpn_challenge_context(certificate.get(), key.get(), error)
                        : SslContextRef{};
        if (!context)
            throw AcmeError{"tls-alpn-01 certificate for " + name,
                            0,
                            {},
                            error.empty() ? "OpenSSL could not make it" : error,
                            0};
        TlsAlpnChallenges::process().add(name, std::move(context));
    }
    ~PublishedChallenge() {
        if (type_ == ChallengeType::Http01)
            HttpChallenges::process().remove(token_);
        else
            TlsAlpnChallenges::process().remove(name_);
    }
    PublishedChallenge(const PublishedChallenge&) = delete;
    PublishedChallenge& operator=(const PublishedChallenge&) = delete;

private:
    ChallengeType type_;
    std::string name_, token_;
};

} // namespace

std::string AcmeError::text() const {
    std::string line = step + ": ";
    if (status) line += std::to_string(status) + " ";
    if (!type.empty()) line += type + ": ";
    line += detail.empty() ? "no detail" : detail;
    if (retry_after_s) line += " (Retry-After " + std::to_string(retry_after_s) + " s)";
    return line;
}

AcmeClient::AcmeClient(HttpClient& http, EVP_PKEY* account_key, std::string directory_url,
                       std::string email)
    : http_(http), account_key_(account_key), directory_url_(std::move(directory_url)),
      email_(std::move(email)) {}

bool AcmeClient::issue(const std::vector<std::string>& names,
                       const std::vector<ChallengeType>& types,
                       const std::function<bool()>& stopping, IssuedCertificate& out,
                       AcmeError& error) {
    try {
        run_order(names, types, stopping, out);
        return true;
    } catch (const AcmeError& failure) {
        error = failure;
    } catch (const json::exception& failure) {
        error = AcmeError{"reading the CA's answer", 0, {}, failure.what(), 0};
    }
    return false;
}

void AcmeClient::run_order(const std::vector<std::string>& names,
                           const std::vector<ChallengeType>& types,
                           const std::function<bool()>& stopping, IssuedCertificate& out) {
    if (new_order_.empty()) load_directory();
    if (kid_.empty()) register_account();
    json identifiers = json::array();
    for (const std::string& name : names)
        identifiers.push_back({{"type", "dns"}, {"value", name}});
    Reply order = post(new_order_, json{{"identifiers", identifiers}}.dump(), "newOrder");
    std::string order_url = order.response.header("location");
    for (const json& authorization : order.body.at("authorizations"))
        authorize(authorization.get<std::string>(), types, stopping);

    EvpKey key = generate_p256_key();
    std::string csr = key ? make_csr_der(key.get(), names) : std::string();
    if (csr.empty()) throw AcmeError{"CSR", 0, {}, "OpenSSL could not make the request", 0};
    order = post(order.body.at("finalize").get<std::string>(), json{{"csr", base64url(csr)}}.dump(),
                 "finalize");
    for (int poll = 0; order.body.value("status", "") != "valid"; ++poll) {
        std::string status = order.body.value("status", "");
        if (status == "invalid" || poll == kPolls || order_url.empty()) {
            json problem = order.body.value("error", json::object());
            throw AcmeError{"order " + status, 0, problem.value("type", ""),
                            problem.value("detail", "the order did not become valid"), 0};
        }
        pause(stopping, retry_after_of(order.response));
        order = post(order_url, "", "order status");
    }
    Reply chain = post(order.body.at("certificate").get<std::string>(), "", "certificate");
    if (chain.response.body.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
        throw AcmeError{"certificate", chain.response.status, {}, "the answer is not PEM", 0};
    out.chain_pem = chain.response.body;
    out.key_pem = private_key_pem(key.get());
}

void AcmeClient::load_directory() {
    HttpResponse response = http_.get(directory_url_);
    if (response.status != 200) throw problem_of(response, "directory " + directory_url_);
    json directory = json::parse(response.body);
    new_nonce_ = directory.at("newNonce").get<std::string>();
    new_account_ = directory.at("newAccount").get<std::string>();
    new_order_ = directory.at("newOrder").get<std::string>();
}

void AcmeClient::fresh_nonce() {
    HttpResponse response = http_.head(new_nonce_);
    nonce_ = response.header("replay-nonce");
    if (nonce_.empty()) throw problem_of(response, "newNonce");
}

AcmeClient::Reply AcmeClient::post(const std::string& url, const std::string& payload,
                                   const std::string& step) {
    for (int attempt = 0;; ++attempt) {
        if (nonce_.empty()) fresh_nonce();
        // RFC 8555 §6.2: newAccount is signed with the key itself (jwk), the
        // rest with the account URL (kid).
        std::string body = make_jws(account_key_, url == new_account_ ? "" : kid_,
                                    std::exchange(nonce_, {}), url, payload);
        Reply reply{http_.post_jose(url, body), nullptr};
        nonce_ = reply.response.header("replay-nonce");
        if (reply.response.status >= 200 && reply.response.status < 300) {
            if (reply.response.header("content-type").starts_with("application/json"))
                reply.body = json::parse(reply.response.body);
            return reply;
        }
        AcmeError error = problem_of(reply.response, step);
        // RFC 8555 §6.5: badNonce carries a fresh nonce; try again with it.
        if (error.type == "urn:ietf:params:acme:error:badNonce" && attempt < kBadNonceRetries)
            continue;
        throw error;
    }
}

void AcmeClient::register_account() {
    json account{{"termsOfServiceAgreed", true}};
    if (!email_.empty()) account["contact"] = json::array({"mailto:" + email_});
    // An account that exists for this key answers 200 with its URL (§7.3.1).
    Reply reply = post(new_account_, account.dump(), "newAccount");
    kid_ = reply.response.header("location");
    if (kid_.empty()) throw AcmeError{"newAccount", reply.response.status, {}, "no Location", 0};
}

void AcmeClient::authorize(const std::string& url, const std::vector<ChallengeType>& types,
                           const std::function<bool()>& stopping) {
    Reply authorization = post(url, "", "authorization");
    if (authorization.body.value("status", "") == "valid") return; // validated recently
    std::string name = authorization.body.at("identifier").at("value").get<std::string>();
    const json* chosen = nullptr;
    ChallengeType type = ChallengeType::Http01;
    for (ChallengeType wanted : types) {
        for (const json& challenge : authorization.body.at("challenges"))
            if (challenge.value("type", "") == challenge_name(wanted)) {
                chosen = &challenge;
                type = wanted;
                break;
            }
        if (chosen) break;
    }
    if (!chosen) throw AcmeError{"authorization of " + name, 0, {}, "no usable challenge", 0};
    std::string step = "validation of " + name + " (" + challenge_name(type) + ")";
    std::string token = chosen->at("token").get<std::string>();
    std::string challenge_url = chosen->at("url").get<std::string>();
    PublishedChallenge published(type, name, token, token + "." + jwk_thumbprint(account_key_));
    post(challenge_url, "{}", step); // RFC 8555 §7.5.1: ready to be validated
    for (int poll = 0;; ++poll) {
        pause(stopping, retry_after_of(authorization.response));
        authorization = post(url, "", "authorization");
        std::string status = authorization.body.value("status", "");
        if (status == "valid") {
            log_info("ACME: %s validated by %s", name.c_str(), challenge_name(type).c_str());
            return;
        }
        if (status != "pending" || poll == kPolls) {
            json problem = json::object();
            for (const json& challenge : authorization.body.value("challenges", json::array()))
                if (challenge.value("url", "") == challenge_url)
                    problem = challenge.value("error", json::object());
            throw AcmeError{step, 0, problem.value("type", ""),
                            problem.value("detail", "authorization " + status), 0};
        }
    }
}

} // namespace lepus::acme
