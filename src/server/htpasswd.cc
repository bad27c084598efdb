#include "server/htpasswd.h"

#include "base/unique_fd.h"

#include <algorithm>
#include <cerrno>
#include <crypt.h>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace lepus {
namespace {

constexpr size_t kMaxFileSize = 16u << 20;

bool is_crypt_base64(char c) {
    return c == '.' || c == '/' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
           (c >= 'a' && c <= 'z');
}

// "$2y$12$" + 22 characters of salt + 31 of hash: what crypt_r's bcrypt
// takes; anything else would fail at every login instead of at start.
bool is_bcrypt(std::string_view hash) {
    if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$')
        return false;
    if (hash[2] != 'y' && hash[2] != 'a' && hash[2] != 'b') return false;
    if (hash[4] < '0' || hash[4] > '3' || hash[5] < '0' || hash[5] > '9') return false;
    int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
    if (cost < 4 || cost > 31) return false;
    return std::all_of(hash.begin() + 7, hash.end(), is_crypt_base64);
}

// yescrypt and SHA-512-crypt: the prefix, then fields of crypt's alphabet
// (plus "rounds=N"), which libcrypt's own check confirms. (It counts
// SHA-256-crypt, $5$, as legacy: refused.)
bool is_modern_crypt(std::string_view hash) {
    if (!hash.starts_with("$y$") && !hash.starts_with("$6$")) return false;
    if (!std::all_of(hash.begin(), hash.end(),
                     [](char c) { return is_crypt_base64(c) || c == '$' || c == '='; }))
        return false;
    std::string setting(hash);
    return crypt_checksalt(setting.c_str()) == CRYPT_SALT_OK;
}

std::string_view trim_line(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
        line.remove_suffix(1);
    return line;
}

} // namespace

std::string refused_hash_reason(std::string_view hash) {
    if (is_bcrypt(hash) || is_modern_crypt(hash)) return {};
    if (hash.starts_with("{SHA}"))
        return "{SHA} is one unsalted SHA-1, which lepus refuses as insecure";
    if (hash.starts_with("$apr1$") || hash.starts_with("$1$"))
        return "MD5 ($apr1$, $1$) is fast to guess, which lepus refuses as insecure";
    if (hash.starts_with("$2"))
        return "a malformed bcrypt hash (it must be $2y$, cost 04-31, and 60 characters)";
    if (hash.starts_with("$"))
        return "an unknown, legacy or malformed hash (lepus takes bcrypt, yescrypt and "
               "SHA-512-crypt)";
    if (hash.size() == 13 && std::all_of(hash.begin(), hash.end(), is_crypt_base64))
        return "DES crypt keeps 8 characters of a password, which lepus refuses as insecure";
    return "a plain-text password, which lepus refuses";
}

std::unique_ptr<Htpasswd> Htpasswd::parse(std::string_view text, std::string_view name,
                                          std::string& error) {
    auto file = std::make_unique<Htpasswd>();
    size_t line_number = 0;
    while (!text.empty()) {
        ++line_number;
        size_t end = text.find('\n');
        std::string_view line = trim_line(text.substr(0, end));
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        if (line.empty() || line.front() == '#') continue;
        std::string where = std::string(name) + ":" + std::to_string(line_number) + ": ";
        size_t colon = line.find(':');
        if (colon == 0 || colon == std::string_view::npos) {
            error = where + "not a \"user:hash\" line";
            return nullptr;
        }
        std::string_view user = line.substr(0, colon), hash = line.substr(colon + 1);
        if (std::string reason = refused_hash_reason(hash); !reason.empty()) {
            error = where;
            error.append("user '").append(user).append("': ").append(reason);
            error.append("; make it again with htpasswd -B");
            return nullptr;
        }
        file->entries_.push_back(Entry{std::string(user), std::string(hash)});
    }
    std::stable_sort(file->entries_.begin(), file->entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.user < b.user; });
    return file;
}

std::unique_ptr<Htpasswd> Htpasswd::load(const std::string& path, std::string& error) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        error = path + ": " + std::strerror(errno);
        return nullptr;
    }
    std::string text;
    char buffer[16384];
    for (;;) {
        ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = path + ": " + std::strerror(errno);
            return nullptr;
        }
        if (n == 0) break;
        text.append(buffer, size_t(n));
        if (text.size() > kMaxFileSize) {
            error = path + ": larger than 16 MiB: not a password file";
            return nullptr;
        }
    }
    return parse(text, path, error);
}

const Htpasswd::Entry* Htpasswd::find(std::string_view user) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), user,
                               [](const Entry& e, std::string_view u) { return e.user < u; });
    return it != entries_.end() && it->user == user ? &*it : nullptr;
}

} // namespace lepus
