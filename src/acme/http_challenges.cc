#include "acme/http_challenges.h"

namespace lepus::acme {

HttpChallenges& HttpChallenges::process() {
    static HttpChallenges challenges;
    return challenges;
}

void HttpChallenges::add(const std::string& token, const std::string& key_authorization) {
    std::lock_guard lock(mutex_);
    tokens_[token] = key_authorization;
    count_.store(tokens_.size(), std::memory_order_relaxed);
}

void HttpChallenges::remove(const std::string& token) {
    std::lock_guard lock(mutex_);
    tokens_.erase(token);
    count_.store(tokens_.size(), std::memory_order_relaxed);
}

std::optional<std::string> HttpChallenges::find(std::string_view token) {
    std::lock_guard lock(mutex_);
    auto it = tokens_.find(token);
    if (it == tokens_.end()) return std::nullopt;
    return it->second;
}

} // namespace lepus::acme
