// ClientConnection: one accepted client socket on one reactor, from accept to
// close. It owns the three layers of the connection, bottom up: the
// Transport (plain TCP, or TLS for a socket from an https:// listener), the
// protocol engine (HTTP/1.1, or HTTP/2 once the client's first bytes are its
// preface: the HTTP/1.1 engine hands the connection over), and, through the
// worker's Router, the handlers. Its own job is the glue to the reactor:
// events in, the one timer for whatever the engine waits on, the yield to
// other connections, and deleting itself when the connection closes. With
// --proxy-protocol it first reads the PROXY header the proxy puts before the
// first request, under the header deadline.
#pragma once

#include "http/exchange.h"
#include "http/http1_engine.h"
#include "http/http2_engine.h"
#include "net/proxy_protocol.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "net/tls_transport.h"
#include "net/transport.h"

#include <variant>

namespace lepus {

class Worker;

class ClientConnection final : public EventHandler, public ExchangeListener {
public:
    // Takes ownership of the socket and registers it with the worker's
    // reactor; the connection deletes itself when it closes.
    static void open(Worker& worker, const AcceptedSocket& socket);

    void on_events(uint32_t events) override;
    void on_shutdown() override;
    void on_force_close() override;
    void on_exchange_progress() override;

private:
    ClientConnection(Worker& worker, const AcceptedSocket& socket);
    ~ClientConnection() = default;

    void drive();
    // Next::Http2 from the HTTP/1.1 engine: the HTTP/2 engine takes over.
    void switch_to_http2();
    // Calls `call` on the engine in charge.
    template <typename Call> auto with_engine(Call call) {
        return h2_ ? call(*h2_) : call(engine_);
    }
    // --proxy-protocol: consumes the PROXY header (exactly its bytes, the
    // request behind it stays in the socket for the engine) and, from a
    // trusted proxy, takes the client address it gives.
    ProxyHeaderStatus read_proxy_header();
    // Arms the one timer for the engine's deadline.
    void arm_timer();
    void close();
    static void on_timer(TimerEntry& entry);

    // One of the two transports lives in place (no allocation per
    // connection); the engine only sees the Transport interface.
    using Transports = std::variant<PlainTransport, TlsTransport>;
    static Transports make_transport(const AcceptedSocket& socket, const ConnectionInfo& info,
                                     size_t reactor_index);

    Reactor& reactor_;
    ConnectionInfo info_; // before the transport: TLS log lines name the peer
    Transports transports_;
    Transport& transport_;
    Http1Engine engine_;
    std::unique_ptr<Http2Engine> h2_; // after the preface; engine_ is closed then
    Worker& worker_;
    OwnedTimerEntry<ClientConnection> timer_;
    bool in_drive_ = false;
    bool progress_ = false; // a stream made progress while drive() ran: run again
    bool closed_ = false;
    bool awaiting_proxy_header_ = false;
    const TrustedProxies& trusted_proxies_;
};

} // namespace lepus
