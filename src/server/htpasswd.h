// Htpasswd: an Apache password file (`htpasswd -B -c FILE USER`), read once at
// start and at each SIGHUP, for HTTP basic auth (server/basic_auth.h).
//
// One "user:hash" per line; blank lines and lines starting with '#' are
// skipped, a trailing CR is dropped (a file saved on Windows). Only hashes
// that are salted and deliberately slow are taken, all checked by libcrypt's
// crypt_r: bcrypt ($2y$, $2a$, $2b$: what `htpasswd -B` writes), yescrypt
// ($y$: Debian's mkpasswd default) and SHA-512-crypt ($6$). Refused, with
// the line named and how to make a good hash:
//   {SHA}          one unsalted SHA-1: a GPU tries billions a second
//   $apr1$, $1$    Apache MD5 / MD5-crypt: 1000 rounds of MD5, nearly as fast
//                  to guess (nginx takes them; lepus asks for -B instead)
//   DES crypt      13 characters: the password is cut at 8 characters
//   $5$ and others what libcrypt counts as legacy, or does not know
//   plain text     anything else
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

class Htpasswd {
public:
    struct Entry {
        std::string user;
        std::string hash; // as crypt_r takes it as the setting
    };

    // Parses the text of a file; nullptr and one line in `error` ("FILE:LINE: what")
    // on the first bad line. `name` is the file's path, for messages.
    static std::unique_ptr<Htpasswd> parse(std::string_view text, std::string_view name,
                                           std::string& error);
    // Reads and parses `path` (at most 16 MiB); nullptr and one line in `error`.
    static std::unique_ptr<Htpasswd> load(const std::string& path, std::string& error);

    // The entry of `user`, or nullptr. The first line wins, as in Apache.
    const Entry* find(std::string_view user) const;
    // Any entry (for an unknown user, so that the answer costs the same), or nullptr.
    const Entry* any() const { return entries_.empty() ? nullptr : &entries_.front(); }
    size_t size() const { return entries_.size(); }

private:
    std::vector<Entry> entries_; // sorted by user (stable: the first of a name first)
};

// Why `hash` is refused (see above), or empty when it is a kind lepus checks.
std::string refused_hash_reason(std::string_view hash);

} // namespace lepus
