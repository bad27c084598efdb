#include "acme/http_challenges.h"

#include "acme/storage.h"

#include <unistd.h>

namespace lepus::acme {
namespace {

// RFC 8555 §8.1: a token is base64url; anything else names no file of ours.
bool is_token(std::string_view token) {
    if (token.empty() || token.size() > 128) return false;
    for (char c : token)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    return true;
}

} // namespace

HttpChallenges HttpChallenges::process_;

void HttpChallenges::share_through(const std::string& folder) {
    std::lock_guard lock(mutex_);
    folder_ = folder;
    count_.store(tokens_.size() + (folder_.empty() ? 0 : 1), std::memory_order_relaxed);
}

void HttpChallenges::add(const std::string& token, const std::string& key_authorization) {
    std::lock_guard lock(mutex_);
    tokens_[token] = key_authorization;
    count_.store(tokens_.size() + (folder_.empty() ? 0 : 1), std::memory_order_relaxed);
    std::string ignored; // the other instances miss it; this one still answers
    if (!folder_.empty() && is_token(token))
        write_private_file(folder_ + "/" + token, key_authorization, ignored);
}

void HttpChallenges::remove(const std::string& token) {
    std::lock_guard lock(mutex_);
    tokens_.erase(token);
    count_.store(tokens_.size() + (folder_.empty() ? 0 : 1), std::memory_order_relaxed);
    if (!folder_.empty() && is_token(token)) ::unlink((folder_ + "/" + token).c_str());
}

std::optional<std::string> HttpChallenges::find(std::string_view token) {
    std::lock_guard lock(mutex_);
    auto it = tokens_.find(token);
    if (it != tokens_.end()) return it->second;
    std::string answer;
    if (folder_.empty() || !is_token(token) ||
        !read_whole_file(folder_ + "/" + std::string(token), answer) || answer.size() > 512)
        return std::nullopt;
    return answer;
}

} // namespace lepus::acme
