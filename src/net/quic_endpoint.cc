#include "net/quic_endpoint.h"

#include "log/error_log.h"
#include "net/quic_connection.h"
#include "net/quic_tls.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <iterator>
#include <netinet/in.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <sys/epoll.h>
#include <sys/socket.h>

namespace lepus {

namespace {

std::string cid_key(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Retry tokens carry a wall-clock time (CLOCK_REALTIME, nanoseconds), as ngtcp2's examples do.
uint64_t token_time_ns() {
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec);
}

} // namespace

std::vector<UniqueFd> open_quic_sockets(const SocketAddress& address, bool dual_stack,
                                        size_t copies, std::string& error) {
    std::vector<UniqueFd> sockets;
    for (size_t i = 0; i < copies; ++i) {
        UniqueFd fd(
            socket(address.storage.any.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        int on = 1, off = 0;
        bool ok = fd && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0;
        if (ok && address.storage.any.sa_family == AF_INET6)
            ok = setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &off : &on,
                            sizeof on) == 0;
        SocketAddress bound = address;
        if (ok && i > 0) {
            bound.length = sizeof bound.storage; // the port the first one got (port 0)
            ok = getsockname(sockets.front().get(), &bound.storage.any, &bound.length) == 0;
        }
        if (!ok || bind(fd.get(), &bound.storage.any, bound.length) != 0) {
            error = "quic://" + address.to_string() + ": " + strerror(errno);
            return {};
        }
        sockets.push_back(std::move(fd));
    }
    return sockets;
}

QuicEndpoint::QuicEndpoint(Reactor& reactor, UniqueFd fd, const QuicTlsContext& tls,
                           ApplicationFactory factory, QuicGauges& gauges)
    : reactor_(reactor), fd_(std::move(fd)), tls_(tls), factory_(std::move(factory)),
      gauges_(gauges), sender_(fd_.get(), udp_gso_usable(fd_.get())) {
    gnutls_rnd(GNUTLS_RND_KEY, token_secret_, sizeof token_secret_);
    local_.length = sizeof local_.storage;
    if (getsockname(fd_.get(), &local_.storage.any, &local_.length) != 0) local_.length = 0;
}

QuicEndpoint::~QuicEndpoint() {
    on_force_close();
    sweep();
}

bool QuicEndpoint::start() {
    static std::atomic_flag said;
    if (!said.test_and_set())
        log_info("QUIC: %s", sender_.gso() ? "UDP GSO on (UDP_SEGMENT), recvmmsg/sendmmsg"
                                           : "UDP GSO off, recvmmsg/sendmmsg");
    return reactor_.add(fd_.get(), this, EPOLLIN, false);
}

void QuicEndpoint::on_events(uint32_t events) {
    if (events & kResumeEvent) deferred_ = false;
    if ((events & EPOLLIN) || unread_) {
        unread_ = false;
        for (size_t handled = 0; handled < kMaxPacketsPerPass;) {
            size_t want = std::min(UdpReceiveBatch::kBatch, kMaxPacketsPerPass - handled);
            size_t n = receiver_.receive(fd_.get(), want);
            for (size_t i = 0; i < n; ++i) {
                QuicGauges::bump(gauges_.packets_received);
                if (receiver_.truncated(i)) {
                    QuicGauges::bump(gauges_.packets_dropped); // over 64 KiB: not QUIC's
                    continue;
                }
                dispatch(receiver_.peer(i), receiver_.data(i), receiver_.size(i));
            }
            handled += n;
            if (n < want) break; // drained (edge-triggered: read to EAGAIN)
            if (handled == kMaxPacketsPerPass) {
                unread_ = true; // more may wait, and no new edge will say so: come back
                wake(nullptr);
            }
        }
    }
    finish_pass();
}

void QuicEndpoint::feed(const SocketAddress& peer, const uint8_t* data, size_t size) {
    QuicGauges::bump(gauges_.packets_received);
    dispatch(peer, data, size);
    finish_pass();
}

void QuicEndpoint::finish_pass() {
    std::vector<QuicConnection*> woken;
    woken.swap(woken_);
    for (QuicConnection* connection : woken)
        if (connections_.contains(connection)) connection->drive();
    sweep();
    flush_sends();
}

void QuicEndpoint::flush_sends() {
    if (sender_.empty()) return;
    UdpSendBatch::Counts counts = sender_.flush();
    QuicGauges::bump(gauges_.packets_sent, counts.sent);
    QuicGauges::bump(gauges_.packets_dropped, counts.dropped);
    QuicGauges::bump(gauges_.send_calls, counts.calls);
}

void QuicEndpoint::dispatch(const SocketAddress& peer, const uint8_t* data, size_t size) {
    ngtcp2_version_cid header;
    // ngtcp2 asserts on an empty datagram (a valid UDP packet, and a crash).
    int rv = size == 0 ? NGTCP2_ERR_INVALID_ARGUMENT
                       : ngtcp2_pkt_decode_version_cid(&header, data, size, kCidLength);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION && send_version_negotiation(peer, &header, size))
        return;
    if (rv != 0) {
        QuicGauges::bump(gauges_.packets_dropped);
        return;
    }
    auto found = by_cid_.find(cid_key(header.dcid, header.dcidlen));
    if (found != by_cid_.end()) {
        found->second->receive(peer, data, size);
        return;
    }
    // One of our IDs, issued by another reactor: hand the packet to its owner.
    if (header.dcidlen == kCidLength && header.dcid[0] != reactor_.index() &&
        header.dcid[0] < siblings_.size() && siblings_[header.dcid[0]] != this) {
        QuicEndpoint* owner = siblings_[header.dcid[0]];
        QuicGauges::bump(gauges_.handed_over);
        owner->reactor_.post(
            [owner, peer, bytes = std::string(reinterpret_cast<const char*>(data), size)] {
                owner->dispatch(peer, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
                owner->finish_pass();
            });
        return;
    }
    accept(peer, data, size);
}

void QuicEndpoint::accept(const SocketAddress& peer, const uint8_t* data, size_t size) {
    ngtcp2_pkt_hd header;
    if (!accepting_ || ngtcp2_accept(&header, data, size) != 0) {
        QuicGauges::bump(gauges_.packets_dropped); // not an Initial (or a stopping server)
        return;
    }
    ngtcp2_cid original_dcid;
    const ngtcp2_cid* retried = nullptr;
    if (header.token.len > 0 && header.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
        if (ngtcp2_crypto_verify_retry_token(
                &original_dcid, header.token.base, header.token.len, token_secret_,
                sizeof token_secret_, header.version, &peer.storage.any, peer.length, &header.dcid,
                kRetryTokenLifetimeMs * NGTCP2_MILLISECONDS, token_time_ns()) != 0) {
            QuicGauges::bump(gauges_.packets_dropped); // forged, stale, or from elsewhere
            return;
        }
        retried = &original_dcid;
    } else if (handshaking_ >= kRetryAbove) {
        send_retry(peer, &header);
        return;
    }
    auto owned = std::make_unique<QuicConnection>(*this, local_, peer);
    QuicConnection* connection = owned.get();
    std::string why;
    if (!connection->init(header, retried, why)) {
        log_warn("client %s: QUIC: %s", peer.to_string().c_str(), why.c_str());
        QuicGauges::bump(gauges_.packets_dropped);
        return; // ~QuicConnection forgets the IDs init() registered
    }
    connection->set_application(factory_(*connection));
    connections_.emplace(connection, std::move(owned));
    reactor_.hold_drain(true); // SIGTERM lets its streams finish
    QuicGauges::bump(gauges_.connections);
    QuicGauges::bump(gauges_.connections_total);
    connection->receive(peer, data, size);
}

void QuicEndpoint::send_retry(const SocketAddress& peer, const void* initial) {
    const auto& header = *static_cast<const ngtcp2_pkt_hd*>(initial);
    ngtcp2_cid scid;
    make_cid(scid);
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
    ngtcp2_ssize token_length = ngtcp2_crypto_generate_retry_token(
        token, token_secret_, sizeof token_secret_, header.version, &peer.storage.any, peer.length,
        &scid, &header.dcid, token_time_ns());
    if (token_length < 0) return;
    uint8_t* packet = send_space();
    ngtcp2_ssize n =
        ngtcp2_crypto_write_retry(packet, UdpSendBatch::kMaxDatagram, header.version, &header.scid,
                                  &scid, &header.dcid, token, size_t(token_length));
    if (n <= 0) return;
    queue_send(peer, size_t(n));
    QuicGauges::bump(gauges_.retries);
}

// RFC 9000 §6.1: a client's first packet in a version we do not speak is
// answered with the versions we do. Only for a datagram that could start a
// connection (at least 1200 bytes, §14.1), so the answer is always the
// smaller (no amplification), and never for a Version Negotiation packet
// (version 0). At most kVersionNegotiationsPerSecond per endpoint, as Retry
// is bounded: past that a flood of them is dropped.
bool QuicEndpoint::send_version_negotiation(const SocketAddress& peer, const void* decoded,
                                            size_t size) {
    const auto& header = *static_cast<const ngtcp2_version_cid*>(decoded);
    if (header.version == 0 || size < NGTCP2_MAX_UDP_PAYLOAD_SIZE) return false;
    uint64_t second = reactor_.now_ms() / 1000;
    if (second != negotiation_second_) {
        negotiation_second_ = second;
        negotiations_this_second_ = 0;
    }
    if (negotiations_this_second_ >= kVersionNegotiationsPerSecond) return false;
    static constexpr uint32_t kVersions[] = {NGTCP2_PROTO_VER_V1};
    uint8_t unused;
    gnutls_rnd(GNUTLS_RND_NONCE, &unused, 1);
    // Its DCID is the client's SCID and its SCID the client's DCID (§17.2.1).
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        send_space(), UdpSendBatch::kMaxDatagram, unused, header.scid, header.scidlen, header.dcid,
        header.dcidlen, kVersions, std::size(kVersions));
    if (n <= 0) return false;
    ++negotiations_this_second_;
    queue_send(peer, size_t(n));
    QuicGauges::bump(gauges_.version_negotiations);
    return true;
}

uint8_t* QuicEndpoint::send_space() {
    if (!sender_.has_room()) flush_sends();
    return sender_.space();
}

void QuicEndpoint::queue_send(const SocketAddress& to, size_t size) {
    sender_.push(to, size);
    wake(nullptr); // flushed at the endpoint's deferred turn, after this round of events
}

void QuicEndpoint::make_cid(ngtcp2_cid& cid) {
    cid.datalen = kCidLength;
    cid.data[0] = uint8_t(reactor_.index()); // the owner, for a packet that lands elsewhere
    gnutls_rnd(GNUTLS_RND_NONCE, cid.data + 1, kCidLength - 1);
}

void QuicEndpoint::add_cid(const ngtcp2_cid& cid, QuicConnection* connection) {
    by_cid_[cid_key(cid.data, cid.datalen)] = connection;
}

void QuicEndpoint::remove_cid(const ngtcp2_cid& cid) {
    auto found = by_cid_.find(cid_key(cid.data, cid.datalen));
    if (found != by_cid_.end()) by_cid_.erase(found);
}

void QuicEndpoint::retire(QuicConnection* connection) {
    retired_.push_back(connection);
    wake(nullptr);
}

void QuicEndpoint::wake(QuicConnection* connection) {
    if (connection) woken_.push_back(connection);
    if (!deferred_) {
        deferred_ = true;
        reactor_.defer(fd_.get());
    }
}

void QuicEndpoint::sweep() {
    std::vector<QuicConnection*> retired;
    retired.swap(retired_);
    for (QuicConnection* connection : retired) {
        auto found = connections_.find(connection);
        if (found == connections_.end()) continue;
        connections_.erase(found); // ~QuicConnection forgets its IDs
        reactor_.hold_drain(false);
        // A draining reactor looks at its count at the top of its loop: one
        // more turn now, rather than a wait until the drain deadline.
        if (reactor_.stopping()) wake(nullptr);
        gauges_.connections.store(gauges_.connections.load(std::memory_order_relaxed) - 1,
                                  std::memory_order_relaxed);
    }
}

void QuicEndpoint::on_stop_accepting() {
    accepting_ = false;
    std::vector<QuicConnection*> all;
    for (auto& [connection, owned] : connections_)
        all.push_back(connection);
    for (QuicConnection* connection : all)
        connection->shutdown();
}

void QuicEndpoint::on_force_close() {
    std::vector<QuicConnection*> all;
    for (auto& [connection, owned] : connections_)
        all.push_back(connection);
    for (QuicConnection* connection : all)
        connection->close_gracefully();
    flush_sends(); // the reactor is ending: no deferred turn will come
}

} // namespace lepus
