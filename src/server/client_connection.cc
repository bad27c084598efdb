#include "server/client_connection.h"

#include "log/error_log.h"
#include "net/tls_context.h"
#include "server/worker.h"

#include <cerrno>
#include <sys/epoll.h>
#include <sys/socket.h>

namespace lepus {

void ClientConnection::open(Worker& worker, const AcceptedSocket& socket) {
    auto* connection = new ClientConnection(worker, socket);
    // Not in the poller yet: most new connections carry their request already,
    // and one answered and closed in this first pass never needs it.
    if (!worker.reactor().add(socket.fd, connection, EPOLLIN | EPOLLOUT | EPOLLRDHUP, true,
                              /*watch=*/false)) {
        // The fd was counted by the acceptor; the reactor never saw it.
        connection->engine_.close();
        delete connection;
        return;
    }
    // Most clients send the request right after connecting: try reading now
    // rather than waiting for the edge (TCP_DEFER_ACCEPT-like, without the option).
    connection->awaiting_proxy_header_ = worker.options().proxy_protocol;
    if (connection->awaiting_proxy_header_)
        connection->on_events(EPOLLIN);
    else
        connection->drive();
}

ClientConnection::ClientConnection(Worker& worker, const AcceptedSocket& socket)
    : reactor_(worker.reactor()), info_(without_v4_mapping(socket.peer), socket.fd),
      transports_(make_transport(socket, info_, reactor_.index())),
      transport_(std::visit([](Transport& t) -> Transport& { return t; }, transports_)),
      engine_(worker.http1(), transport_, info_, *this), worker_(worker),
      timer_(this, &ClientConnection::on_timer),
      trusted_proxies_(worker.options().trusted_proxies) {
    info_.secure = socket.tls;
    info_.h2c_only = socket.h2c;
    if (socket.tls)
        std::get<TlsTransport>(transports_)
            .publish_session_to(&info_.tls_protocol, &info_.tls_cipher, &info_.alpn_h2);
}

ClientConnection::Transports ClientConnection::make_transport(const AcceptedSocket& socket,
                                                              const ConnectionInfo& info,
                                                              size_t reactor_index) {
    if (!socket.tls) return Transports(std::in_place_type<PlainTransport>, UniqueFd(socket.fd));
    // The context published last (start-up or SIGHUP); this connection keeps
    // it (SSL_new takes a reference) even if a reload publishes another.
    return Transports(std::in_place_type<TlsTransport>, UniqueFd(socket.fd),
                      TlsContextSlot::process().current(), info.peer, tls_counters(reactor_index));
}

ProxyHeaderStatus ClientConnection::read_proxy_header() {
    char peeked[kMaxProxyHeader];
    ssize_t n = ::recv(transport_.fd(), peeked, sizeof peeked, MSG_PEEK);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? ProxyHeaderStatus::Again
                                                 : ProxyHeaderStatus::Error;
    ProxyHeader header;
    ProxyHeaderStatus status = parse_proxy_header({peeked, size_t(n)}, header);
    if (status == ProxyHeaderStatus::Again && n == 0) return ProxyHeaderStatus::Error; // closed
    if (status != ProxyHeaderStatus::Done) return status;
    // What was peeked is in the socket buffer: this read takes exactly the header.
    if (::recv(transport_.fd(), peeked, header.size, 0) != ssize_t(header.size))
        return ProxyHeaderStatus::Error;
    // From anyone else a PROXY header is consumed (the listener requires one) and ignored.
    if (header.source && trusted_proxies_.trusts(info_.socket_peer)) info_.peer = *header.source;
    return ProxyHeaderStatus::Done;
}

void ClientConnection::on_events(uint32_t events) {
    if (events & (EPOLLERR | EPOLLHUP)) {
        close();
        return;
    }
    if (awaiting_proxy_header_) {
        if (!(events & (EPOLLIN | EPOLLRDHUP | kResumeEvent))) return;
        switch (read_proxy_header()) {
        case ProxyHeaderStatus::Error:
            // As nginx: a connection without a valid header is closed unanswered.
            log_info("client %s: no valid PROXY protocol header; closed",
                     info_.socket_peer.to_string().c_str());
            close();
            return;
        case ProxyHeaderStatus::Again:
            // The rest comes with a later edge: the socket must be in the poller.
            if (!reactor_.watch(transport_.fd())) return close();
            arm_timer(); // the header deadline, running since accept
            return;
        case ProxyHeaderStatus::Done:
            awaiting_proxy_header_ = false;
            events |= EPOLLIN; // the request may have come with it
            break;
        }
    }
    // A TLS handshake (or SSL_read) that waited for the socket to take its
    // bytes goes on through the read path.
    if ((events & (EPOLLIN | kResumeEvent)) || ((events & EPOLLOUT) && transport_.wants_write()))
        with_engine([](auto& engine) { engine.on_readable(); });
    if (events & EPOLLRDHUP) with_engine([](auto& engine) { engine.on_peer_shutdown(); });
    // An EPOLLOUT edge alone only matters to output that is waiting.
    if (!(events & (EPOLLIN | EPOLLRDHUP | kResumeEvent)) &&
        !with_engine([](auto& engine) { return engine.waits_for_write(); }))
        return;
    drive();
}

void ClientConnection::on_shutdown() {
    if (with_engine([](auto& engine) { return engine.on_shutdown(); })) close();
}

void ClientConnection::on_force_close() {
    close();
}

void ClientConnection::on_exchange_progress() {
    if (in_drive_)
        progress_ = true; // drive() looks again before it waits
    else
        drive();
}

void ClientConnection::drive() {
    if (in_drive_ || closed_) return;
    in_drive_ = true;
    Http1Engine::Next next;
    do {
        progress_ = false;
        next = with_engine([](auto& engine) { return engine.drive(); });
        if (next == Http1Engine::Next::Http2) {
            switch_to_http2();
            progress_ = true;
            next = Http1Engine::Next::Wait;
        }
        // A stream reported progress while the engine was busy: look again.
    } while (next == Http1Engine::Next::Wait && progress_);
    in_drive_ = false;
    switch (next) {
    case Http1Engine::Next::Http2: // handled above
    case Http1Engine::Next::Close:
        close();
        return;
    case Http1Engine::Next::Yield:
        if (!reactor_.watch(transport_.fd())) return close();
        reactor_.defer(transport_.fd());
        return;
    case Http1Engine::Next::Wait:
        if (!reactor_.watch(transport_.fd())) return close();
        arm_timer();
        return;
    }
}

void ClientConnection::switch_to_http2() {
    // The preface and whatever followed it go to the new engine; the HTTP/1.1
    // engine has no exchange in flight and gives its request state back.
    h2_ = std::make_unique<Http2Engine>(worker_.http1(), transport_, info_, *this,
                                        engine_.pending_input(), &worker_.stats().http2);
    engine_.close();
}

void ClientConnection::arm_timer() {
    uint64_t deadline = with_engine([](auto& engine) { return engine.deadline(); });
    TimerWheel& timers = reactor_.timers();
    if (deadline == 0) {
        timers.cancel(timer_);
    } else if (with_engine([](auto& engine) { return engine.deadline_exact(); })) {
        if (!timer_.scheduled() || timer_.deadline() != deadline) timers.schedule(timer_, deadline);
    } else {
        // Per request this is usually a no-op: within the slack nothing moves.
        timers.refresh(timer_, deadline);
    }
}

void ClientConnection::on_timer(TimerEntry& entry) {
    ClientConnection& self = OwnedTimerEntry<ClientConnection>::owner_of(entry);
    if (self.awaiting_proxy_header_) {
        self.close(); // the header deadline passed before the PROXY header was complete
        return;
    }
    if (self.with_engine([](auto& engine) { return engine.on_deadline(); }) ==
        Http1Engine::Next::Close) {
        self.close();
        return;
    }
    // refresh() with slack fired before the real deadline.
    uint64_t deadline = self.with_engine([](auto& engine) { return engine.deadline(); });
    if (deadline != 0) self.reactor_.timers().schedule(entry, deadline);
}

void ClientConnection::close() {
    if (closed_) return;
    closed_ = true;
    reactor_.timers().cancel(timer_);
    // Logs and lets go of an exchange in flight (its backend connection drains
    // back into its pool).
    if (h2_) h2_->close();
    engine_.close();
    reactor_.remove(transport_.fd());
    std::visit([](auto& transport) { transport.close(); }, transports_);
    if (!in_drive_) delete this;
}

} // namespace lepus
