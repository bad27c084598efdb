#include "net/udp_batch.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

namespace lepus {

namespace {

bool same_address(const SocketAddress& a, const SocketAddress& b) {
    return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

} // namespace

bool udp_gso_usable(int fd) {
    if (const char* off = std::getenv("LEPUS_QUIC_NO_GSO"); off && *off && *off != '0')
        return false;
    // Reading the option is the probe: a kernel without UDP GSO answers
    // ENOPROTOOPT (EINVAL on some), and setting it would make every send segmented.
    int size = 0;
    socklen_t length = sizeof size;
    return getsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, &length) == 0;
}

// --- UdpReceiveBatch ---

UdpReceiveBatch::UdpReceiveBatch()
    // 2 MiB of address space; only the pages datagrams touch become memory.
    : buffer_(new uint8_t[kBatch * kMaxDatagram]), peers_(kBatch), messages_(new mmsghdr[kBatch]),
      vectors_(new iovec[kBatch]) {}

UdpReceiveBatch::~UdpReceiveBatch() = default;

size_t UdpReceiveBatch::receive(int fd, size_t most) {
    if (most > kBatch) most = kBatch;
    for (size_t i = 0; i < most; ++i) {
        vectors_[i] = {buffer_.get() + i * kMaxDatagram, kMaxDatagram};
        peers_[i].length = sizeof peers_[i].storage;
        messages_[i] = {};
        messages_[i].msg_hdr.msg_name = &peers_[i].storage;
        messages_[i].msg_hdr.msg_namelen = peers_[i].length;
        messages_[i].msg_hdr.msg_iov = &vectors_[i];
        messages_[i].msg_hdr.msg_iovlen = 1;
    }
    int n;
    do
        n = recvmmsg(fd, messages_.get(), unsigned(most), MSG_DONTWAIT, nullptr);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return 0; // EAGAIN (edge-triggered: read to it), or an ICMP error
    for (int i = 0; i < n; ++i)
        peers_[size_t(i)].length = messages_[i].msg_hdr.msg_namelen;
    return size_t(n);
}

size_t UdpReceiveBatch::size(size_t i) const {
    return messages_[i].msg_len;
}

bool UdpReceiveBatch::truncated(size_t i) const {
    return messages_[i].msg_hdr.msg_flags & MSG_TRUNC;
}

// --- UdpSendBatch ---

UdpSendBatch::UdpSendBatch(int fd, bool gso)
    : fd_(fd), gso_(gso), buffer_(new uint8_t[kBufferSize]) {
    units_.reserve(kMaxMessages);
}

UdpSendBatch::~UdpSendBatch() = default;

bool UdpSendBatch::has_room() const {
    return used_ + kMaxDatagram <= kBufferSize && units_.size() < kMaxMessages;
}

void UdpSendBatch::push(const SocketAddress& to, size_t size) {
    if (gso_ && !units_.empty()) {
        Unit& last = units_.back();
        if (!last.closed && size <= last.segment && last.count < kMaxSegments &&
            last.bytes + size <= kMaxGsoBytes && last.offset + last.bytes == used_ &&
            same_address(last.to, to)) {
            last.bytes += size;
            ++last.count;
            last.closed = size < last.segment;
            used_ += size;
            return;
        }
    }
    units_.push_back(Unit{to, used_, size, size, 1, false});
    used_ += size;
}

UdpSendBatch::Counts UdpSendBatch::flush() {
    Counts counts;
    // One control message per unit: UDP_SEGMENT, the size of its datagrams.
    alignas(cmsghdr) char control[kMaxMessages][CMSG_SPACE(sizeof(uint16_t))];
    mmsghdr messages[kMaxMessages];
    iovec vectors[kMaxMessages];
    size_t total = units_.size();
    for (size_t i = 0; i < total; ++i) {
        Unit& unit = units_[i];
        vectors[i] = {buffer_.get() + unit.offset, unit.bytes};
        messages[i] = {};
        msghdr& header = messages[i].msg_hdr;
        header.msg_name = &unit.to.storage;
        header.msg_namelen = unit.to.length;
        header.msg_iov = &vectors[i];
        header.msg_iovlen = 1;
        if (unit.count > 1) {
            header.msg_control = control[i];
            header.msg_controllen = sizeof control[i];
            cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
            cmsg->cmsg_level = SOL_UDP;
            cmsg->cmsg_type = UDP_SEGMENT;
            cmsg->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            auto segment = uint16_t(unit.segment);
            std::memcpy(CMSG_DATA(cmsg), &segment, sizeof segment);
        }
    }
    for (size_t at = 0; at < total;) {
        int n = sendmmsg(fd_, messages + at, unsigned(total - at), MSG_DONTWAIT);
        ++counts.calls;
        if (n > 0) {
            for (size_t i = at; i < at + size_t(n); ++i)
                counts.sent += units_[i].count;
            at += size_t(n);
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            // A full socket buffer: the rest is dropped; QUIC's loss recovery sends it again.
            for (size_t i = at; i < total; ++i)
                counts.dropped += units_[i].count;
            break;
        }
        const Unit& unit = units_[at];
        if (unit.count > 1 && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
            // EIO: the device cannot checksum the segments (udp(7)); EINVAL:
            // a limit this kernel has lower. Plain datagrams from now on.
            gso_ = false;
            send_one_by_one(unit, counts);
        } else {
            counts.dropped += unit.count; // EPERM (a firewall), an unreachable network...
        }
        ++at;
    }
    units_.clear();
    used_ = 0;
    return counts;
}

void UdpSendBatch::send_one_by_one(const Unit& unit, Counts& counts) {
    for (size_t offset = 0; offset < unit.bytes; offset += unit.segment) {
        size_t size = std::min(unit.segment, unit.bytes - offset);
        ssize_t sent;
        do
            sent = sendto(fd_, buffer_.get() + unit.offset + offset, size, MSG_DONTWAIT,
                          &unit.to.storage.any, unit.to.length);
        while (sent < 0 && errno == EINTR);
        ++counts.calls;
        ++(sent < 0 ? counts.dropped : counts.sent);
    }
}

} // namespace lepus
