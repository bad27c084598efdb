#include "http/exchange.h"

#include <sys/socket.h>

namespace lepus {

const SocketAddress& ConnectionInfo::local() {
    if (!have_local_ && fd >= 0) {
        local_.length = sizeof local_.storage;
        if (getsockname(fd, &local_.storage.any, &local_.length) != 0) local_ = SocketAddress{};
        have_local_ = true;
    }
    return local_;
}

} // namespace lepus
