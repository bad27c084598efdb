#include "proxy/backend_url.h"

namespace lepus::proxy {

std::optional<upstream::BackendAddress> parse_backend_url(std::string_view text) {
    std::string_view rest = text;
    if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
        // proxy_pass http://app/ is the same backend as http://app: lepus
        // passes the client's URI unchanged either way.
        if (rest.ends_with('/')) rest.remove_suffix(1);
        if (rest.starts_with("unix:")) return std::nullopt;
    }
    auto address = upstream::parse_backend_address(rest);
    if (address) address->text.assign(text);
    return address;
}

} // namespace lepus::proxy
