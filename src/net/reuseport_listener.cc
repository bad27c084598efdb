#include "net/reuseport_listener.h"

#include "log/error_log.h"

#include <cerrno>
#include <cstring>

namespace lepus {

void ReusePortListener::on_events(uint32_t) {
    for (;;) {
        AcceptedSocket socket;
        socket.tls = tls_;
        if (!accept_one(fd_.get(), socket)) {
            // On EMFILE the backlog waits for the next edge; nothing spins.
            if (errno != EAGAIN) log_error("accept: %s", strerror(errno));
            return;
        }
        if (admission_.admit(socket)) reactor_.accept_local(socket);
    }
}

} // namespace lepus
