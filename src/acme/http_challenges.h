// HTTP-01 (RFC 8555 §8.3): the key authorizations lepus answers at
// /.well-known/acme-challenge/TOKEN while an order is being validated.
// Written by the ACME thread, read by the router (server/router.cc) for
// requests under that path only, hence a plain mutex.
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
    static HttpChallenges& process();

    void add(const std::string& token, const std::string& key_authorization);
    void remove(const std::string& token);
    // The key authorization for `token`; nullopt when none is pending.
    std::optional<std::string> find(std::string_view token);
    // Whether any challenge is pending (the router's fast check).
    bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

private:
    std::mutex mutex_;
    std::map<std::string, std::string, std::less<>> tokens_;
    std::atomic<size_t> count_{0};
};

} // namespace lepus::acme
