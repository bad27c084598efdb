// QuicConnection: one QUIC connection (RFC 9000) on its reactor: ngtcp2 for
// the transport (packets, loss recovery, congestion and flow control, the 3x
// amplification limit before the client's address is validated, §8.1) and
// GnuTLS for its handshake (net/quic_tls.h). Its endpoint (net/quic_endpoint.h)
// hands it the datagrams whose destination connection ID it owns; it sends
// what ngtcp2 produces through the endpoint's socket, and keeps one timer on
// the reactor's wheel for ngtcp2's expiry (loss detection, ACK delay and the
// idle timeout of §10.1).
//
// What runs on the streams is a QuicApplication (HTTP/3: http/http3_engine.h),
// which knows nothing of packets: it is handed stream bytes, gives stream
// bytes to send, and is told of acknowledgements, resets and flow-control
// credit. The connection knows nothing of HTTP.
//
// A first slice: a connection that fails is answered with one
// CONNECTION_CLOSE and forgotten at once (no closing period of §10.2.1:
// a late packet of it is then dropped as unknown).
#pragma once

#include "net/socket.h"
#include "net/timer_wheel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct ngtcp2_conn;
struct ngtcp2_pkt_hd;
struct ngtcp2_cid;

namespace lepus {

class QuicEndpoint;
class QuicTlsSession;

// A run of bytes, as ngtcp2_vec and nghttp3_vec lay it out.
struct QuicVec {
    uint8_t* base;
    size_t len;
};

// What runs on a connection's streams. Every call is made by the connection
// on its reactor; a negative return is a connection error.
class QuicApplication {
public:
    virtual ~QuicApplication() = default;
    // The 1-RTT keys are in place: open the application's own streams.
    virtual bool start() = 0;
    // Bytes of stream `id` (`fin`: its last). Returns the bytes whose flow
    // control credit goes back to the client now (the rest: extend_stream_offset later).
    virtual int64_t receive(int64_t id, const uint8_t* data, size_t size, bool fin) = 0;
    // `bytes` more of what stream `id` sent were acknowledged: they may be freed.
    virtual int acknowledged(int64_t id, uint64_t bytes) = 0;
    virtual int stream_closed(int64_t id, uint64_t app_error) = 0;
    // The client reset stream `id`, or asked us to stop sending on it.
    virtual int stream_reset(int64_t id) = 0;
    // The client gave stream `id` more flow-control credit.
    virtual int stream_unblocked(int64_t id) = 0;
    // The client may now open this many bidirectional streams in all.
    virtual void client_streams(uint64_t max) = 0;
    // Stream bytes to send next: the number of `vec` filled (0 and id -1:
    // nothing to send), or negative on an error.
    virtual int64_t next_data(int64_t& id, bool& fin, QuicVec* vec, size_t count) = 0;
    // Stream `id` has no flow-control credit left / may not send any more.
    virtual void stream_blocked(int64_t id) = 0;
    virtual void stream_write_shut(int64_t id) = 0;
    // `bytes` of what next_data() gave for stream `id` were packed.
    virtual int written(int64_t id, size_t bytes) = 0;
    // Before packets are written: let backends that made progress go on.
    virtual void poll() = 0;
    // The server stops: no new requests (GOAWAY).
    virtual void shutdown() = 0;
    // No request is in flight.
    virtual bool idle() const = 0;
    // The application's error code for an orderly close (H3_NO_ERROR).
    virtual uint64_t no_error_code() const = 0;
    // The connection is gone: exchanges in flight are finished.
    virtual void close() = 0;
};

class QuicConnection {
public:
    QuicConnection(QuicEndpoint& endpoint, const SocketAddress& local, const SocketAddress& peer);
    ~QuicConnection();
    QuicConnection(const QuicConnection&) = delete;
    QuicConnection& operator=(const QuicConnection&) = delete;

    // From the client's first Initial packet: ngtcp2 and GnuTLS state; false
    // (with a reason in `why`) when the connection cannot be made.
    // `retried`: the client's first DCID, when this Initial answered our Retry.
    bool init(const ngtcp2_pkt_hd& initial, const ngtcp2_cid* retried, std::string& why);
    void set_application(std::unique_ptr<QuicApplication> application) {
        application_ = std::move(application);
    }
    // A datagram for this connection from `peer`.
    void receive(const SocketAddress& peer, const uint8_t* data, size_t size);
    // Lets the application work and sends what is due; arms the timer.
    void drive();
    // SIGTERM: GOAWAY, then the streams in flight finish and the connection closes.
    void shutdown();
    // Closes now with a CONNECTION_CLOSE that says no error (the server stops).
    void close_gracefully();
    // Closes now, silently (the client left, or the close was sent).
    void close();
    bool closed() const { return closed_; }

    // --- for the application ---
    bool open_uni_stream(int64_t& id);
    // Gives `bytes` of flow-control credit back on stream `id` (and the connection).
    void extend_stream_offset(int64_t id, uint64_t bytes);
    void shutdown_stream_read(int64_t id, uint64_t app_error);
    void shutdown_stream_write(int64_t id, uint64_t app_error);
    // A client stream is done: the client may open one more (RFC 9000 §4.6).
    void allow_one_more_stream();
    uint64_t max_local_streams_uni() const;
    uint64_t initial_client_streams() const;
    const SocketAddress& peer() const { return peer_; }
    const SocketAddress& local() const { return local_; }
    QuicEndpoint& endpoint() { return endpoint_; }
    // The socket, for ConnectionInfo (getsockname).
    int fd() const;

    static constexpr uint64_t kIdleTimeoutMs = 30'000;
    // A handshake not complete by then ends the connection (a flood's stall).
    static constexpr uint64_t kHandshakeTimeoutMs = 10'000;
    static constexpr uint64_t kStreamWindow = uint64_t{256} * 1024;
    static constexpr uint64_t kConnectionWindow = 1 << 20;
    static constexpr uint64_t kMaxStreams = 100;
    // Packets written per drive() before other connections get their turn.
    static constexpr int kMaxPacketsPerPass = 64;

private:
    friend struct QuicCallbacks;
    // A fatal error: CONNECTION_CLOSE, then the connection is forgotten.
    void fail(int liberr, bool tls_alert = false);
    bool write_packets();
    // One CONNECTION_CLOSE (an ngtcp2_connection_close_error), unless closing already.
    void send_close(const void* close_error);
    void arm_timer();
    void count_losses_of_open_streams();
    static void on_timer(TimerEntry& entry);
    static uint64_t now_ns();

    QuicEndpoint& endpoint_;
    SocketAddress local_;
    SocketAddress peer_; // the client's first address (the one its exchanges see)
    ngtcp2_conn* conn_ = nullptr;
    std::unique_ptr<QuicTlsSession> session_; // after conn_: deleted once ngtcp2 is done with it
    struct ConnRef;                           // ngtcp2_crypto_conn_ref, for GnuTLS's callbacks
    std::unique_ptr<ConnRef> conn_ref_;
    std::unique_ptr<QuicApplication> application_;
    std::unique_ptr<ngtcp2_cid> initial_dcid_; // the client's first DCID, routed to us too
    OwnedTimerEntry<QuicConnection> timer_;
    bool application_started_ = false;
    bool in_drive_ = false;
    bool again_ = false; // drive() was asked for while it ran
    bool shutting_down_ = false;
    bool handshaking_ = false; // counted in the endpoint's handshakes in progress
    bool closed_ = false;
    int64_t highest_stream_ = -1; // the highest stream ID seen, for the loss count at close
};

} // namespace lepus
