#include "base/unique_fd.h"
#include "net/udp_batch.h"

#include <cstring>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <vector>

namespace lepus {
namespace {

// A non-blocking UDP socket on 127.0.0.1 at a port of the kernel's choice.
UniqueFd bound_socket(SocketAddress& address) {
    UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
    address.length = sizeof address.storage;
    EXPECT_EQ(getsockname(fd.get(), &address.storage.any, &address.length), 0);
    return fd;
}

void queue(UdpSendBatch& batch, const SocketAddress& to, size_t size, char fill) {
    ASSERT_TRUE(batch.has_room());
    std::memset(batch.space(), fill, size);
    batch.push(to, size);
}

// Every datagram waiting on `fd`, as (size, first byte).
std::vector<std::pair<size_t, char>> receive_all(int fd) {
    UdpReceiveBatch receiver;
    std::vector<std::pair<size_t, char>> got;
    for (;;) {
        size_t n = receiver.receive(fd, UdpReceiveBatch::kBatch);
        for (size_t i = 0; i < n; ++i) {
            EXPECT_FALSE(receiver.truncated(i));
            got.emplace_back(receiver.size(i), char(receiver.data(i)[0]));
        }
        if (n < UdpReceiveBatch::kBatch) return got;
    }
}

class UdpBatch : public ::testing::TestWithParam<bool> {};

// The datagrams arrive as queued, one by one, whether the kernel cut a GSO
// run into them or they left one per message; the counts say how many calls.
TEST_P(UdpBatch, DatagramsArriveAsQueued) {
    SocketAddress a, b, from;
    UniqueFd receiver_a = bound_socket(a), receiver_b = bound_socket(b);
    UniqueFd sender = bound_socket(from);
    bool gso = GetParam() && udp_gso_usable(sender.get());
    if (GetParam() && !gso) GTEST_SKIP() << "this kernel has no UDP GSO";
    UdpSendBatch batch(sender.get(), gso);
    // To a: three of 1200 and a shorter last (one GSO run), then 1200 again
    // (a new run: only a run's last may be shorter); to b: two of 1000.
    queue(batch, a, 1200, 'a');
    queue(batch, a, 1200, 'b');
    queue(batch, a, 1200, 'c');
    queue(batch, a, 500, 'd');
    queue(batch, a, 1200, 'e');
    queue(batch, b, 1000, 'f');
    queue(batch, b, 1000, 'g');
    UdpSendBatch::Counts counts = batch.flush();
    EXPECT_EQ(counts.sent, 7u);
    EXPECT_EQ(counts.dropped, 0u);
    EXPECT_EQ(counts.calls, 1u); // one sendmmsg: 3 messages with GSO, 7 without
    EXPECT_TRUE(batch.empty());
    std::vector<std::pair<size_t, char>> at_a = receive_all(receiver_a.get());
    std::vector<std::pair<size_t, char>> want_a = {
        {1200, 'a'}, {1200, 'b'}, {1200, 'c'}, {500, 'd'}, {1200, 'e'}};
    EXPECT_EQ(at_a, want_a);
    std::vector<std::pair<size_t, char>> at_b = receive_all(receiver_b.get());
    std::vector<std::pair<size_t, char>> want_b = {{1000, 'f'}, {1000, 'g'}};
    EXPECT_EQ(at_b, want_b);
}

// A run stops at 64 datagrams (the kernel's UDP_MAX_SEGMENTS on older
// kernels) and at 65,000 bytes: 100 of 1,400 bytes still all arrive.
TEST_P(UdpBatch, LongRunsAreCutToTheKernelsLimits) {
    SocketAddress a, from;
    UniqueFd receiver = bound_socket(a), sender = bound_socket(from);
    int big = 4 << 20;
    setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    bool gso = GetParam() && udp_gso_usable(sender.get());
    if (GetParam() && !gso) GTEST_SKIP() << "this kernel has no UDP GSO";
    UdpSendBatch batch(sender.get(), gso);
    uint64_t sent = 0, dropped = 0;
    for (int i = 0; i < 100; ++i) {
        if (!batch.has_room()) { // 64 messages at most per sendmmsg (without GSO)
            UdpSendBatch::Counts counts = batch.flush();
            sent += counts.sent;
            dropped += counts.dropped;
        }
        queue(batch, a, 1400, char('0' + i % 10));
    }
    UdpSendBatch::Counts counts = batch.flush();
    EXPECT_EQ(sent + counts.sent, 100u);
    EXPECT_EQ(dropped + counts.dropped, 0u);
    std::vector<std::pair<size_t, char>> got = receive_all(receiver.get());
    ASSERT_EQ(got.size(), 100u);
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], std::make_pair(size_t(1400), char('0' + i % 10))) << i;
}

INSTANTIATE_TEST_SUITE_P(GsoAndNot, UdpBatch, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return info.param ? "Gso" : "NoGso";
                         });

TEST(UdpGso, TheEnvironmentSwitchTurnsItOff) {
    SocketAddress a;
    UniqueFd fd = bound_socket(a);
    setenv("LEPUS_QUIC_NO_GSO", "1", 1);
    EXPECT_FALSE(udp_gso_usable(fd.get()));
    unsetenv("LEPUS_QUIC_NO_GSO");
}

} // namespace
} // namespace lepus
