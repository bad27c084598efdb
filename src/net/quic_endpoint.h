// QuicEndpoint: one reactor's UDP socket of a quic:// listener, and the QUIC
// connections that reactor owns.
//
// Every reactor binds its own socket to the listen address with SO_REUSEPORT,
// so the kernel spreads clients over the reactors by the hash of their
// address and port. A connection's packets keep that 4-tuple, and so land on
// the reactor that made the connection; the connection IDs the server issues
// still name their reactor in their first byte (kReactorByte), so that a
// packet that lands elsewhere (the client's address changed: RFC 9000 §9, or
// the reuseport group changed) is handed to its owner with Reactor::post, the
// reactors' existing channel for rare cross-thread work. An eBPF
// SO_ATTACH_REUSEPORT_EBPF program reading that byte would steer such
// packets in the kernel; it is not needed for the common path.
//
// A client's first packet in a version ngtcp2 does not speak gets a Version
// Negotiation packet (RFC 9000 §6), kVersionNegotiationsPerSecond at most.
//
// Address validation (RFC 9000 §8.1.2): while kRetryAbove handshakes are
// in progress on the reactor (a flood of Initials from forged addresses), a
// new client gets a Retry with a token bound to its address, and only an
// Initial that brings that token back makes a connection; below it, clients
// are served at once (one round trip saved), ngtcp2 keeping the 3x
// amplification limit until the handshake validates them.
//
// Packets (net/udp_batch.h): read with recvmmsg, up to 32 a call and
// kMaxPacketsPerPass per wake-up; written by the connections into the
// endpoint's send batch and sent when the reactor's round of events is over
// (a deferred turn), a connection's run of equal-sized packets as one GSO
// send where the kernel has UDP_SEGMENT, the runs of several connections in
// one sendmmsg. A send the socket refuses (EAGAIN) is dropped and counted,
// and QUIC's loss recovery sends it again.
#pragma once

#include "base/unique_fd.h"
#include "net/reactor.h"
#include "net/udp_batch.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct ngtcp2_cid;

namespace lepus {

class QuicApplication;
class QuicConnection;
class QuicTlsContext;

// Counters of one reactor's QUIC endpoints, for the status page. Written by
// the reactor's thread only (load + store), read by any.
struct QuicGauges {
    std::atomic<uint64_t> connections{0}, connections_total{0};
    std::atomic<uint64_t> packets_received{0}, packets_sent{0}, packets_dropped{0};
    std::atomic<uint64_t> handed_over{0};          // packets of another reactor's connection
    std::atomic<uint64_t> retries{0};              // Retry packets sent (address validation)
    std::atomic<uint64_t> version_negotiations{0}; // Version Negotiation packets sent (§6)
    std::atomic<uint64_t> send_calls{0}; // sendmmsg/sendmsg calls (fewer than packets: batching)
    // Packets carrying stream data that loss recovery declared lost (RFC
    // 9002 §6), added as each stream closes: ngtcp2 0.12 counts losses per
    // stream only (ngtcp2_conn_get_stream_loss_count); 1.x has pkt_lost per connection.
    std::atomic<uint64_t> packets_lost{0};

    static void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
};

// `copies` UDP sockets bound to `address` with SO_REUSEPORT (one per reactor),
// non-blocking; empty, with one line in `error`, on failure.
std::vector<UniqueFd> open_quic_sockets(const SocketAddress& address, bool dual_stack,
                                        size_t copies, std::string& error);

class QuicEndpoint final : public EventHandler {
public:
    // Makes the application of a new connection (HTTP/3).
    using ApplicationFactory = std::function<std::unique_ptr<QuicApplication>(QuicConnection&)>;

    static constexpr size_t kCidLength = 18; // bytes of the connection IDs lepus issues
    static constexpr size_t kMaxPacketsPerPass = 64;
    // Handshakes in progress from which a new client must validate its address first.
    static constexpr size_t kRetryAbove = 64;
    // How long a Retry token is good for.
    static constexpr uint64_t kRetryTokenLifetimeMs = 10'000;
    // Version Negotiation packets an endpoint sends per second at most.
    static constexpr uint64_t kVersionNegotiationsPerSecond = 100;

    QuicEndpoint(Reactor& reactor, UniqueFd fd, const QuicTlsContext& tls,
                 ApplicationFactory factory, QuicGauges& gauges);
    ~QuicEndpoint();

    // Registers the socket with its reactor (before it runs).
    bool start();
    // The endpoints of the same address on every reactor, by reactor index
    // (this one among them), for handing packets over.
    void set_siblings(std::vector<QuicEndpoint*> siblings) { siblings_ = std::move(siblings); }

    void on_events(uint32_t events) override;
    void on_shutdown() override {}
    void on_force_close() override;
    // SIGTERM: every connection says GOAWAY; no new connection is made.
    void on_stop_accepting() override;
    // One datagram from `peer` as if the socket had received it, then what it
    // made due (drive, sweep): the packet path without a socket read, for
    // test/fuzz/quic_packet_fuzz.cc.
    void feed(const SocketAddress& peer, const uint8_t* data, size_t size);

    // --- for the connections ---
    Reactor& reactor() { return reactor_; }
    const QuicTlsContext& tls() const { return tls_; }
    QuicGauges& gauges() { return gauges_; }
    int fd() const { return fd_.get(); }
    // Where the next packet is written (UdpSendBatch::kMaxDatagram bytes),
    // valid until queue_send(); sends what is queued first when the batch is full.
    uint8_t* send_space();
    // The `size` bytes written at send_space() go to `to` at the end of the
    // reactor's round (or sooner, when the batch fills).
    void queue_send(const SocketAddress& to, size_t size);
    // Whether sends use GSO (for the start-up line and the tests).
    bool gso() const { return sender_.gso(); }
    // A new connection ID of this reactor (kReactorByte, then random bytes).
    void make_cid(ngtcp2_cid& cid);
    void add_cid(const ngtcp2_cid& cid, QuicConnection* connection);
    void remove_cid(const ngtcp2_cid& cid);
    // A connection's handshake began / ended (completed, or the connection closed).
    void handshake_started() { ++handshaking_; }
    void handshake_ended() { --handshaking_; }
    // The connection closed: it is deleted at the endpoint's next turn, out
    // of every call of its own.
    void retire(QuicConnection* connection);
    // The connection wants drive() once the current event is handled.
    void wake(QuicConnection* connection);

private:
    struct Datagram {
        SocketAddress peer;
        std::string bytes;
    };
    // One datagram, received here or handed over.
    void dispatch(const SocketAddress& peer, const uint8_t* data, size_t size);
    void accept(const SocketAddress& peer, const uint8_t* data, size_t size);
    // Drives the connections woken by the packets just handled; deletes the retired.
    void finish_pass();
    void flush_sends();
    // RFC 9000 §8.1.2: a Retry with a token for `peer` (header: its Initial's).
    void send_retry(const SocketAddress& peer, const void* header);
    // RFC 9000 §6: false when not sent (too small, a VN itself, over the bound).
    bool send_version_negotiation(const SocketAddress& peer, const void* header, size_t size);
    void sweep();

    Reactor& reactor_;
    UniqueFd fd_;
    SocketAddress local_;
    const QuicTlsContext& tls_;
    ApplicationFactory factory_;
    QuicGauges& gauges_;
    std::vector<QuicEndpoint*> siblings_;
    std::unordered_map<std::string, QuicConnection*> by_cid_;
    std::unordered_map<QuicConnection*, std::unique_ptr<QuicConnection>> connections_;
    std::vector<QuicConnection*> retired_, woken_;
    UdpReceiveBatch receiver_;
    UdpSendBatch sender_;
    bool accepting_ = true;
    size_t handshaking_ = 0;
    uint8_t token_secret_[32]; // keys this endpoint's Retry tokens
    bool deferred_ = false;
    uint64_t negotiation_second_ = 0, negotiations_this_second_ = 0;
    bool unread_ = false; // a pass stopped at kMaxPacketsPerPass with the socket not drained
};

} // namespace lepus
