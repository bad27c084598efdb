#include "http/exchange.h"

#include "base/ascii.h"

#include <sys/socket.h>

namespace lepus {

using namespace std::string_view_literals;

// The names are string_views, not a braced list of literals: that would make
// a strlen per name per call.
bool is_backend_own_field(std::string_view name) {
    for (std::string_view own :
         {"Connection"sv, "Keep-Alive"sv, "Transfer-Encoding"sv, "TE"sv, "Trailer"sv, "Upgrade"sv,
          "Proxy-Connection"sv, "Content-Length"sv, "Date"sv, "Server"sv})
        if (ascii_iequals(name, own)) return true;
    return false;
}

const SocketAddress& ConnectionInfo::local() {
    if (!have_local_ && fd >= 0) {
        local_.length = sizeof local_.storage;
        if (getsockname(fd, &local_.storage.any, &local_.length) != 0) local_ = SocketAddress{};
        have_local_ = true;
    }
    return local_;
}

} // namespace lepus
