// Automatic HTTPS (issue 34): which certificates lepus asks the ACME CA for
// and how. `--domain NAME` (repeatable) names one certificate for the default
// root; each [[site]] with tls = "acme" one for its server_names. A stored
// certificate (acme/storage.h) is served from the start; one not issued yet
// is refused with an alert until the ACME thread (acme/manager.h) brings it.
#pragma once

#include "acme/manager.h"
#include "server/options.h"

#include <string>
#include <vector>

namespace lepus {

struct TlsSettings;

// Whether any certificate comes from ACME.
bool uses_acme(const ServerOptions& options);
// Validates --domain and the ACME sites' names, resolves --acme-ca's names
// ("letsencrypt", "staging"); one line when something is wrong.
std::string finish_acme_options(ServerOptions& options);
// The names of each ACME certificate: --domain's first, then each site's.
std::vector<std::vector<std::string>> acme_certificate_names(const ServerOptions& options);
// Adds the ACME certificates to `settings`: the stored chain and key where
// there are both, else the names alone (refused until issued). --domain's is
// also the default certificate when no other is given.
void add_acme_certificates(const ServerOptions& options, TlsSettings& settings);
// The port of the first https:// TCP listener (0: none), where an ACME
// site's plain-HTTP requests are sent.
uint16_t acme_redirect_port(const ServerOptions& options);
// What the ACME thread needs: the CA, the state folder, the certificates and
// the challenges the listeners can answer (HTTP-01 with a plain listener,
// TLS-ALPN-01 with a TLS one, in that order).
acme::AcmeOptions acme_options(const ServerOptions& options);

} // namespace lepus
