// HTTP-01 (RFC 8555 §8.3): the key authorizations lepus answers at
// /.well-known/acme-challenge/TOKEN while an order is being validated.
// Written by the ACME thread, read by the router (server/router_acme.cc) for
// requests under that path only, hence a plain mutex.
//
// With a shared folder (STATE/acme/challenges), a token is also written there,
// so that every instance sharing the state folder answers it: the CA's
// validator may reach any instance behind the load balancer, not only the
// one that ordered (Caddy's distributed challenge solving alike).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace lepus::acme {

inline constexpr std::string_view kHttpChallengePrefix = "/.well-known/acme-challenge/";

class HttpChallenges {
public:
    // The process's one table. Inline, as answering(): the router asks on
    // every request, and a call per request shows in instructions per request.
    static HttpChallenges& process() { return process_; }

    // Before the reactors start: tokens are also written to, and looked up in, `folder`.
    void share_through(const std::string& folder);
    void add(const std::string& token, const std::string& key_authorization);
    void remove(const std::string& token);
    // The key authorization for `token`; nullopt when none is pending.
    std::optional<std::string> find(std::string_view token);
    // Whether the router must look (tokens pending here, or a shared folder).
    bool answering() const { return count_.load(std::memory_order_relaxed) != 0; }

private:
    std::mutex mutex_;
    std::map<std::string, std::string, std::less<>> tokens_;
    std::string folder_;
    std::atomic<size_t> count_{0}; // tokens, plus one with a shared folder

    static HttpChallenges process_;
};

} // namespace lepus::acme
