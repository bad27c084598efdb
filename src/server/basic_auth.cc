#include "server/basic_auth.h"

#include "base/ascii.h"
#include "base/offload_pool.h"
#include "net/reactor.h"
#include "server/htpasswd.h"

#include <algorithm>
#include <crypt.h>
#include <cstring>
#include <map>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <thread>

namespace lepus {
namespace {

// The verifier threads of the process, started by the first check. Half the
// cores (two at least, four at most): enough to keep logins moving, never
// all the cores the reactors need. The queue bound keeps a flood of logins
// (each costing tens of milliseconds) from waiting minutes: beyond it, 503.
OffloadPool& verifiers() {
    static OffloadPool pool(std::clamp<size_t>(std::thread::hardware_concurrency() / 2, 2, 4), 256);
    return pool;
}

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// RFC 4648 §4 base64; the '=' padding may be left out (some clients do).
bool decode_base64(std::string_view text, std::string& out) {
    out.clear();
    while (!text.empty() && text.back() == '=')
        text.remove_suffix(1);
    if (text.size() % 4 == 1) return false;
    uint32_t bits = 0;
    int count = 0;
    for (char c : text) {
        int value = base64_value(c);
        if (value < 0) return false;
        bits = (bits << 6) | uint32_t(value);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out.push_back(char((bits >> count) & 0xff));
        }
    }
    return true;
}

std::array<unsigned char, 32> credential_key(std::string_view user, std::string_view password,
                                             std::string_view hash) {
    std::array<unsigned char, 32> key{};
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    unsigned char zero = 0;
    // Lengths first, so that no two different triples feed the same bytes.
    uint64_t sizes[3] = {user.size(), password.size(), hash.size()};
    bool ok = context && EVP_DigestInit_ex(context, EVP_sha256(), nullptr) == 1 &&
              EVP_DigestUpdate(context, sizes, sizeof sizes) == 1 &&
              EVP_DigestUpdate(context, user.data(), user.size()) == 1 &&
              EVP_DigestUpdate(context, &zero, 1) == 1 &&
              EVP_DigestUpdate(context, password.data(), password.size()) == 1 &&
              EVP_DigestUpdate(context, &zero, 1) == 1 &&
              EVP_DigestUpdate(context, hash.data(), hash.size()) == 1 &&
              EVP_DigestFinal_ex(context, key.data(), nullptr) == 1;
    EVP_MD_CTX_free(context);
    if (!ok) key.fill(0); // never cached (see remember)
    return key;
}

// On a verifier thread: crypt_r with the stored hash as the setting gives
// the stored hash back exactly when the password is right.
bool verify(const AuthCheck& check) {
    thread_local crypt_data data{}; // about 32 KiB: one per thread, not per call
    const char* computed = crypt_r(check.password.c_str(), check.hash.c_str(), &data);
    if (!computed || check.unknown_user) return false;
    size_t length = std::strlen(computed);
    return length == check.hash.size() &&
           CRYPTO_memcmp(computed, check.hash.data(), length) == 0; // no early exit
}

} // namespace

bool load_site_auth(std::vector<SiteConfig>& sites, std::string& error) {
    std::map<std::string, std::shared_ptr<const Htpasswd>> files;
    auto load = [&](std::vector<AuthRule>& rules) {
        for (AuthRule& rule : rules) {
            if (rule.off) continue;
            auto& file = files[rule.htpasswd];
            if (!file) {
                std::string message;
                file = Htpasswd::load(rule.htpasswd, message);
                if (!file) {
                    error = rule.origin + ": auth: " + message;
                    return false;
                }
            }
            rule.users = file;
        }
        return true;
    };
    for (SiteConfig& site : sites) {
        if (!load(site.auth)) return false;
        for (SiteLocation& location : site.locations)
            if (location.own && !load(location.own->auth)) return false;
    }
    return true;
}

const AuthRule* find_auth_rule(const SiteConfig& site, std::string_view decoded_path) {
    const AuthRule* best = nullptr;
    size_t best_length = 0;
    auto matches = [decoded_path](const AuthRule& rule, std::string_view prefix) {
        if (!rule.case_insensitive) return decoded_path.starts_with(prefix);
        return decoded_path.size() >= prefix.size() &&
               ascii_iequals(decoded_path.substr(0, prefix.size()), prefix);
    };
    for (const AuthRule& rule : site.auth)
        for (const std::string& prefix : rule.paths)
            if (matches(rule, prefix) && (!best || prefix.size() > best_length)) {
                best = &rule;
                best_length = prefix.size();
            }
    return best && !best->off ? best : nullptr;
}

std::optional<BasicCredentials> parse_basic_credentials(std::string_view value,
                                                        std::string& decoded) {
    // credentials = auth-scheme 1*SP token68 (RFC 9110 §11.4, RFC 7617 §2).
    constexpr std::string_view kScheme = "Basic";
    if (value.size() <= kScheme.size() || !ascii_iequals(value.substr(0, 5), kScheme) ||
        value[5] != ' ')
        return std::nullopt;
    value = trim_ows(value.substr(6));
    if (value.empty() || !decode_base64(value, decoded)) return std::nullopt;
    size_t colon = decoded.find(':'); // the user-id has none (RFC 7617 §2)
    if (colon == std::string::npos) return std::nullopt;
    std::string_view text = decoded;
    // Control characters are not allowed in either (RFC 7617 §2).
    if (std::any_of(text.begin(), text.end(),
                    [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; }))
        return std::nullopt;
    return BasicCredentials{text.substr(0, colon), text.substr(colon + 1)};
}

struct BasicAuth::Port {
    std::mutex mutex;
    Reactor* reactor = nullptr; // null once the BasicAuth is gone
    BasicAuth* auth = nullptr;
};

size_t BasicAuth::KeyHash::operator()(const std::array<unsigned char, 32>& key) const {
    size_t value; // the key is a SHA-256: any 8 bytes of it are a good hash
    std::memcpy(&value, key.data(), sizeof value);
    return value;
}

BasicAuth::BasicAuth(Reactor& reactor) : port_(std::make_shared<Port>()) {
    port_->reactor = &reactor;
    port_->auth = this;
}

BasicAuth::~BasicAuth() {
    // A verifier finishing later finds no reactor and drops its verdict.
    std::lock_guard lock(port_->mutex);
    port_->reactor = nullptr;
}

BasicAuth::Outcome BasicAuth::check(const AuthRule& rule, const BasicCredentials& credentials,
                                    std::shared_ptr<AuthCheck>& check) {
    const Htpasswd* users = rule.users.get();
    const Htpasswd::Entry* entry = users ? users->find(credentials.user) : nullptr;
    const Htpasswd::Entry* against = entry ? entry : users ? users->any() : nullptr;
    if (!against) return Outcome::Denied;
    std::array<unsigned char, 32> key =
        credential_key(credentials.user, credentials.password, against->hash);
    if (entry) {
        auto found = cache_.find(key);
        if (found != cache_.end()) {
            order_.splice(order_.begin(), order_, found->second); // most recently used
            return Outcome::Granted;
        }
    }
    check = std::make_shared<AuthCheck>();
    check->password.assign(credentials.password);
    check->hash = against->hash;
    check->unknown_user = !entry;
    check->key = key;
    bool queued = verifiers().submit([port = port_, check] {
        if (!check->abandoned.load(std::memory_order_relaxed)) check->granted = verify(*check);
        explicit_bzero(check->password.data(), check->password.size());
        std::lock_guard lock(port->mutex);
        if (port->reactor)
            port->reactor->post([auth = port->auth, check] { auth->complete(*check); });
    });
    if (!queued) {
        explicit_bzero(check->password.data(), check->password.size());
        check.reset();
        return Outcome::Busy;
    }
    return Outcome::Pending;
}

void BasicAuth::complete(AuthCheck& check) {
    if (check.granted) remember(check.key);
    if (check.waiter) check.waiter->on_verdict(check.granted);
}

void BasicAuth::remember(const std::array<unsigned char, 32>& key) {
    if (key == std::array<unsigned char, 32>{} || cache_.contains(key)) return;
    if (cache_.size() >= kCacheEntries) {
        cache_.erase(order_.back());
        order_.pop_back();
    }
    order_.push_front(key);
    cache_.emplace(key, order_.begin());
}

} // namespace lepus
