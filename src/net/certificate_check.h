// Checks of a PEM certificate file beyond what OpenSSL's loading does (issue
// 33): a certificate that loads but will not be trusted (expired, or not for
// the site's names) is worth a warning at -t and start; a chain whose own
// certificate is not first loads as the wrong one and then "does not match"
// its key, which says nothing of the real mistake.
#pragma once

#include <ctime>
#include <openssl/types.h>
#include <string>
#include <vector>

namespace lepus {

// One line per problem of the certificate file at `cert_path` that still
// serves (no prefix, no newline): the first certificate expired (or not yet
// valid) at `now`, one of `names` ("example.org", "*.example.org") it does not
// cover, certificates after the first that do not each issue the one before.
// Empty when the file cannot be read (loading reports that).
std::vector<std::string> certificate_warnings(const std::string& cert_path,
                                              const std::vector<std::string>& names, time_t now);

// For a key that does not match the first certificate of `cert_path`: why,
// when it matches a later one (the chain is in the wrong order), else empty.
std::string misordered_chain(const std::string& cert_path, EVP_PKEY* key);

} // namespace lepus
