// Where the ACME client keeps what it owns, under --state-dir (default
// /var/lib/lepus, systemd's StateDirectory=lepus): folders 0700, keys 0600.
//
//   STATE/acme/accounts/HOST/account.key     the account key, per CA
//   STATE/acme/challenges/TOKEN              HTTP-01 answers while validated,
//                                            for every instance to give
//   STATE/certificates/NAME/fullchain.pem    the chain served for a site
//   STATE/certificates/NAME/privkey.pem      its key
//   STATE/certificates/NAME/.lock            taken (flock) while ordering, so
//                                            instances sharing STATE order once
// NAME is the first name of the certificate, lower case.
#pragma once

#include <string>
#include <vector>

namespace lepus::acme {

inline constexpr const char* kDefaultStateDir = "/var/lib/lepus";

struct CertificatePaths {
    std::string folder, chain, key, lock;
};

// The files of the certificate for `names` (its first name picks the folder).
CertificatePaths certificate_paths(const std::string& state_dir,
                                   const std::vector<std::string>& names);
// The account key file for the CA at `directory_url`.
std::string account_key_path(const std::string& state_dir, const std::string& directory_url);

// mkdir -p with mode 0700 for what it makes. False with `error` on failure.
bool make_private_folder(const std::string& path, std::string& error);
// Writes `content` to `path` (mode 0600) through a temporary file and a
// rename, so a reader sees the old file or the new one, never half of it.
bool write_private_file(const std::string& path, const std::string& content, std::string& error);
// The names whose certificates were ordered on demand (a file "on-demand" in
// their folder), so that a restart serves and renews them.
std::vector<std::string> on_demand_names(const std::string& state_dir);
// The whole file; false when it cannot be read.
bool read_whole_file(const std::string& path, std::string& content);

} // namespace lepus::acme
