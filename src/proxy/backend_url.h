// The address of an HTTP backend as written in --proxy and a site's `proxy`:
// "http://HOST:PORT" (an IP literal, or localhost; a trailing "/" allowed),
// "HOST:PORT", or "unix:/path".
#pragma once

#include "upstream/backend_address.h"

#include <optional>
#include <string_view>

namespace lepus::proxy {

// nullopt for anything else (https://, a path after the authority, a name to resolve).
std::optional<upstream::BackendAddress> parse_backend_url(std::string_view text);

} // namespace lepus::proxy
