// UdpReceiveBatch and UdpSendBatch: datagrams in and out of a UDP socket a
// batch per system call (recvmmsg, sendmmsg), with UDP generic segmentation
// offload (GSO, the UDP_SEGMENT control message, Linux 4.18+) where the
// kernel has it: a run of datagrams of one size to one address leaves in one
// sendmsg and the kernel cuts it into datagrams. Knows nothing of QUIC.
#pragma once

#include "net/socket.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

struct mmsghdr;
struct iovec;

namespace lepus {

// Whether the socket takes UDP_SEGMENT (false: ENOPROTOOPT on a kernel
// without UDP GSO), and LEPUS_QUIC_NO_GSO is not set in the environment (a
// switch for the tests, which must exercise both send paths).
bool udp_gso_usable(int fd);

// Up to kBatch datagrams per recvmmsg into buffers of its own.
class UdpReceiveBatch {
public:
    static constexpr size_t kBatch = 32;
    // The largest UDP payload (RFC 9000 §18.2's max_udp_payload_size bound).
    static constexpr size_t kMaxDatagram = 65536;

    UdpReceiveBatch();
    ~UdpReceiveBatch();
    UdpReceiveBatch(const UdpReceiveBatch&) = delete;
    UdpReceiveBatch& operator=(const UdpReceiveBatch&) = delete;

    // Reads up to `most` (<= kBatch) datagrams: how many (0: none waiting, or
    // an error). Fewer than `most` means the socket was drained.
    size_t receive(int fd, size_t most);
    const SocketAddress& peer(size_t i) const { return peers_[i]; }
    const uint8_t* data(size_t i) const { return buffer_.get() + i * kMaxDatagram; }
    size_t size(size_t i) const;
    // The datagram was larger than its buffer (MSG_TRUNC): drop it.
    bool truncated(size_t i) const;

private:
    std::unique_ptr<uint8_t[]> buffer_;
    std::vector<SocketAddress> peers_;
    std::unique_ptr<mmsghdr[]> messages_;
    std::unique_ptr<iovec[]> vectors_;
};

// Datagrams queued by the caller, written in place, sent by flush().
class UdpSendBatch {
public:
    static constexpr size_t kMaxDatagram = 1500; // what space() guarantees
    static constexpr size_t kBufferSize = size_t{256} * 1024;
    static constexpr size_t kMaxSegments = 64;    // UDP_MAX_SEGMENTS of older kernels
    static constexpr size_t kMaxGsoBytes = 65000; // an IPv4 datagram's payload is < 64 KiB
    static constexpr size_t kMaxMessages = 64;    // per sendmmsg

    struct Counts {
        uint64_t sent = 0;    // datagrams the kernel took
        uint64_t dropped = 0; // datagrams refused (EAGAIN: a full socket buffer, or an error)
        uint64_t calls = 0;   // sendmmsg/sendmsg calls
    };

    UdpSendBatch(int fd, bool gso);
    ~UdpSendBatch();
    UdpSendBatch(const UdpSendBatch&) = delete;
    UdpSendBatch& operator=(const UdpSendBatch&) = delete;

    // Whether the next datagram fits (else: flush() first).
    bool has_room() const;
    // Where the next datagram is written: kMaxDatagram bytes, valid until
    // push() or flush().
    uint8_t* space() { return buffer_.get() + used_; }
    // The `size` bytes written at space() are a datagram to `to`. It joins
    // the previous one's GSO run when both go to `to` and the run's datagrams
    // all have this size (only a run's last datagram may be shorter).
    void push(const SocketAddress& to, size_t size);
    bool empty() const { return units_.empty(); }
    // Sends what is queued. A full socket buffer drops the rest (the
    // protocol above sends it again); a GSO send the kernel refuses turns GSO
    // off for this socket and sends the run datagram by datagram.
    Counts flush();
    bool gso() const { return gso_; }

private:
    // One sendmsg: one datagram, or a GSO run of `count` datagrams of `segment` bytes.
    struct Unit {
        SocketAddress to;
        size_t offset, bytes, segment, count;
        bool closed; // its last datagram was shorter: nothing more joins it
    };
    void send_one_by_one(const Unit& unit, Counts& counts);

    int fd_;
    bool gso_;
    std::unique_ptr<uint8_t[]> buffer_;
    size_t used_ = 0;
    std::vector<Unit> units_;
};

} // namespace lepus
