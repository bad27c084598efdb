#include "net/uring.h"

#include "net/poller.h"

#include <cerrno>
#include <cstring>

namespace lepus {

Uring::~Uring() {
    if (initialised_) io_uring_queue_exit(&ring_);
}

bool Uring::init(unsigned entries, unsigned cq_entries, std::string& error, unsigned flags) {
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE | flags;
    params.cq_entries = cq_entries;
    int rc = io_uring_queue_init_params(entries, &ring_, &params);
    if (rc < 0) {
        error = std::string("io_uring_setup: ") + strerror(-rc);
        return false;
    }
    initialised_ = true;
    return true;
}

io_uring_sqe* Uring::next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {
        io_uring_submit(&ring_);
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

bool io_uring_usable(std::string& why) {
    Uring ring;
    if (!ring.init(4, 8, why)) {
        if (why.find("Operation not permitted") != std::string::npos ||
            why.find("Function not implemented") != std::string::npos)
            why += " (seccomp or kernel.io_uring_disabled)";
        return false;
    }
    io_uring_probe* probe = io_uring_get_probe_ring(ring.get());
    // IORING_OP_SOCKET came with Linux 5.19, as did multishot accept; multishot
    // poll (5.13) is older. Its presence stands for both.
    bool recent = probe && io_uring_opcode_supported(probe, IORING_OP_SOCKET);
    if (probe) io_uring_free_probe(probe);
    if (!recent) {
        why = "the kernel lacks multishot accept (needs Linux 5.19)";
        return false;
    }
    return true;
}

} // namespace lepus
