#include "net/reuseport_listener.h"

#include "log/error_log.h"

#include <cerrno>
#include <cstring>

namespace lepus {

void ReusePortListener::on_events(uint32_t) {
    for (;;) {
        AcceptedSocket socket;
        socket.tls = tls_;
        socket.h2c = h2c_;
        if (!accept_one(fd_.get(), socket)) {
            // On EMFILE the backlog waits for the next edge; nothing spins.
            if (errno != EAGAIN) log_error("accept: %s", strerror(errno));
            return;
        }
        if (admission_.admit(socket)) reactor_.accept_local(socket);
    }
}

std::shared_ptr<ReusePortListener> ReusePortListeners::make(size_t reactor, UniqueFd fd, bool tls,
                                                            bool h2c) {
    return std::make_shared<ReusePortListener>(*reactors_[reactor], std::move(fd), live_total_,
                                               max_connections_, tls, h2c);
}

void ReusePortListeners::start(const std::string& text, std::vector<UniqueFd> fds, bool tls,
                               bool h2c) {
    for (size_t i = 0; i < reactors_.size() && i < fds.size(); ++i) {
        auto listener = make(i, std::move(fds[i]), tls, h2c);
        listener->start();
        per_reactor_[i][text] = std::move(listener);
    }
}

void ReusePortListeners::add_running(const std::string& text, std::vector<UniqueFd> fds, bool tls,
                                     bool h2c) {
    for (size_t i = 0; i < reactors_.size() && i < fds.size(); ++i) {
        std::shared_ptr<ReusePortListener> listener = make(i, std::move(fds[i]), tls, h2c);
        reactors_[i]->post([this, i, text, listener] {
            if (listener->start()) per_reactor_[i][text] = listener;
        });
    }
}

void ReusePortListeners::remove_running(const std::string& text) {
    for (size_t i = 0; i < reactors_.size(); ++i) {
        reactors_[i]->post([this, i, text] {
            auto it = per_reactor_[i].find(text);
            if (it == per_reactor_[i].end()) return;
            it->second->stop();
            per_reactor_[i].erase(it);
        });
    }
}

} // namespace lepus
