// HTTP basic auth (RFC 7617) per site and path prefix (`auth` in a [[site]],
// config_file.h AuthRule), checked against an Apache htpasswd file
// (server/htpasswd.h).
//
// A bcrypt check costs tens of milliseconds, so it never runs on a reactor:
//   - each reactor keeps a bounded cache of the credentials it has seen pass
//     (BasicAuth), keyed by SHA-256(user, password, the file's hash for the
//     user): a hit is answered at once, and a changed password in a reloaded
//     file is a different key, so a stale entry can never match;
//   - a miss becomes an AuthCheck run by a few verifier threads (OffloadPool,
//     one per process), whose verdict is posted back to the reactor
//     (Reactor::post) and handed to the waiting request (server/auth_stream.h).
// An unknown user costs a check too (against another user's hash, always
// failing), so that timing does not tell which user names exist.
#pragma once

#include "http/request.h"
#include "server/config_file.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lepus {

class Reactor;

// Reads the htpasswd file of every auth rule of `sites` (a file named by
// several rules is read once). False with one line in `error`
// ("lepus.toml:12:1: auth: /etc/lepus/htpasswd:3: user 'bob': ...").
bool load_site_auth(std::vector<SiteConfig>& sites, std::string& error);

// The rule protecting `decoded_path` (the longest matching prefix of any
// rule), or nullptr when the path is open (no rule, or an `off` one).
const AuthRule* find_auth_rule(const SiteConfig& site, std::string_view decoded_path);

struct BasicCredentials {
    std::string_view user, password; // views into the caller's buffer
};

// The credentials of an Authorization field value "Basic <base64 of user:password>"
// (the scheme case-insensitive, RFC 7617 §2); nullopt when it is another
// scheme or malformed (bad base64, no ':'). `decoded` holds the bytes.
std::optional<BasicCredentials> parse_basic_credentials(std::string_view value,
                                                        std::string& decoded);

// Receives the verdict of an AuthCheck, on the reactor thread.
class AuthWaiter {
public:
    virtual void on_verdict(bool granted) = 0;

protected:
    ~AuthWaiter() = default;
};

// One verification: made on the reactor, run by a verifier thread, completed
// on the reactor (the post's mutex orders the verifier's writes before).
struct AuthCheck {
    std::string password, hash; // the password is wiped once checked
    bool unknown_user = false;  // always fails, after the same work
    bool granted = false;       // the verdict
    std::array<unsigned char, 32> key{};
    // The client left: the verifier skips the work if it has not started.
    std::atomic<bool> abandoned{false};
    AuthWaiter* waiter = nullptr; // reactor thread only; cleared when it goes
};

// One reactor's basic-auth state: its cache of verified credentials and the
// way back from the verifier threads. Reactor thread only.
class BasicAuth {
public:
    static constexpr size_t kCacheEntries = 1024;

    explicit BasicAuth(Reactor& reactor);
    ~BasicAuth();
    BasicAuth(const BasicAuth&) = delete;
    BasicAuth& operator=(const BasicAuth&) = delete;

    enum class Outcome : uint8_t {
        Granted, // verified before (cached): go on
        Pending, // a check was started: wait for the waiter's verdict
        Busy,    // the verifiers' queue is full: 503
        Denied,  // nobody to check against (an empty file): 401 at once
    };
    // Checks `credentials` against `rule`'s file; with Pending, `check` is
    // the verification to wait for (set its waiter).
    Outcome check(const AuthRule& rule, const BasicCredentials& credentials,
                  std::shared_ptr<AuthCheck>& check);

private:
    struct KeyHash {
        size_t operator()(const std::array<unsigned char, 32>& key) const;
    };
    struct Port; // the reactor, as the verifier threads reach it
    void complete(AuthCheck& check);
    void remember(const std::array<unsigned char, 32>& key);

    std::shared_ptr<Port> port_;
    // Least recently used last.
    std::list<std::array<unsigned char, 32>> order_;
    std::unordered_map<std::array<unsigned char, 32>,
                       std::list<std::array<unsigned char, 32>>::iterator, KeyHash>
        cache_;
};

} // namespace lepus
