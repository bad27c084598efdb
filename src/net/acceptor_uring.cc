// The io_uring loop of the Acceptor (--io uring): one multishot accept per
// listener, the wake eventfd on a multishot poll, and the out-of-descriptors
// pause as an IORING_OP_TIMEOUT. Everything else (limits, balancing, hand-off)
// is shared with the epoll loop in acceptor.cc.
#include "log/error_log.h"
#include "net/acceptor.h"
#include "net/uring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/epoll.h>
#include <sys/socket.h>

namespace lepus {
namespace {

// user_data of the ring's requests; a listener's accept carries its fd, a
// cancel of that accept the fd with kCancelBit.
constexpr uint64_t kWakeRequest = ~uint64_t{0};
constexpr uint64_t kPauseRequest = ~uint64_t{0} - 1;
constexpr uint64_t kCancelBit = uint64_t{1} << 62;

void arm_accept(Uring& ring, int listener) {
    io_uring_sqe* sqe = ring.next_sqe();
    // No peer address: with multishot every completion would share one buffer.
    // getpeername asks for it instead.
    io_uring_prep_multishot_accept(sqe, listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, uint64_t(listener));
}

void cancel_accept(Uring& ring, int listener) {
    io_uring_sqe* sqe = ring.next_sqe();
    io_uring_prep_cancel64(sqe, uint64_t(listener), 0);
    io_uring_sqe_set_data64(sqe, uint64_t(listener) | kCancelBit);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS; // success: the accept's -ECANCELED follows
}

bool contains(const std::vector<int>& list, int fd) {
    return std::find(list.begin(), list.end(), fd) != list.end();
}

void arm_wake(Uring& ring, int fd) {
    io_uring_sqe* sqe = ring.next_sqe();
    io_uring_prep_poll_multishot(sqe, fd, EPOLLIN);
    io_uring_sqe_set_data64(sqe, kWakeRequest);
}

} // namespace

// The state of one run of the io_uring loop, and one method per kind of completion.
struct Acceptor::UringLoop {
    explicit UringLoop(Acceptor& acceptor)
        : acceptor(acceptor), pause{acceptor.options_.emfile_pause_ms / 1000,
                                    (acceptor.options_.emfile_pause_ms % 1000) * 1000000LL} {}

    bool is_retiring(int fd) const {
        return std::any_of(retiring.begin(), retiring.end(),
                           [fd](const UniqueFd& l) { return l.get() == fd; });
    }
    void arm(int listener) {
        if (contains(armed, listener)) return;
        arm_accept(ring, listener);
        armed.push_back(listener);
    }
    // One completion; false when the acceptor must stop.
    bool on_completion(const io_uring_cqe& cqe);
    bool on_wake(bool ended);
    void on_accept(int listener, int result, bool ended);

    Acceptor& acceptor;
    Uring ring;
    // Which listeners have an accept in the kernel, until a completion without
    // IORING_CQE_F_MORE says it ended. A cancel can miss an accept that is
    // completing at that moment; it is sent again until the accept has ended.
    std::vector<int> armed;
    // Removed listeners whose accept still holds the socket: closed when it ends
    // (closing earlier would let a new listener reuse the fd number).
    std::vector<UniqueFd> retiring;
    __kernel_timespec pause;
};

void Acceptor::run_uring() {
    UringLoop loop(*this);
    std::string error;
    // Created on the acceptor thread, its only issuer: completions are run in
    // our io_uring_enter instead of interrupting the thread (see uring_poller.cc).
    if (!loop.ring.init(64, 4096, error, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) &&
        !loop.ring.init(64, 4096, error)) {
        log_error("acceptor: %s", error.c_str());
        return;
    }
    for (const UniqueFd& listener : listeners_)
        loop.arm(listener.get());
    arm_wake(loop.ring, wake_fd_.get());
    for (;;) {
        int rc = io_uring_submit_and_wait(loop.ring.get(), 1);
        if (rc < 0 && rc != -EINTR && rc != -EBUSY) {
            log_error("acceptor: io_uring_enter: %s", strerror(-rc));
            return;
        }
        unsigned head, seen = 0;
        io_uring_cqe* cqe;
        io_uring_for_each_cqe(loop.ring.get(), head, cqe) {
            ++seen;
            if (!loop.on_completion(*cqe)) return;
        }
        io_uring_cq_advance(loop.ring.get(), seen);
        wake_reactors();
    }
}

bool Acceptor::UringLoop::on_completion(const io_uring_cqe& cqe) {
    uint64_t key = cqe.user_data;
    bool ended = !(cqe.flags & IORING_CQE_F_MORE);
    if (key == kWakeRequest) return on_wake(ended);
    if (key == kPauseRequest) {
        acceptor.paused_ = false;
        for (const UniqueFd& listener : acceptor.listeners_)
            arm(listener.get());
        return true;
    }
    if (key & kCancelBit) {
        int listener = int(key & ~kCancelBit);
        if (contains(armed, listener) && (acceptor.paused_ || is_retiring(listener)))
            cancel_accept(ring, listener);
        return true;
    }
    on_accept(int(key), cqe.res, ended);
    return true;
}

// The eventfd: a stop, or listeners to add and remove (SIGHUP).
bool Acceptor::UringLoop::on_wake(bool ended) {
    if (acceptor.stop_requested_.load()) return false;
    ListenerChange change = acceptor.take_changes();
    acceptor.note_tls_listeners(change);
    std::vector<UniqueFd>& listeners = acceptor.listeners_;
    for (int fd : change.removed) {
        auto it = std::find_if(listeners.begin(), listeners.end(),
                               [fd](const UniqueFd& l) { return l.get() == fd; });
        if (it == listeners.end()) continue;
        if (contains(armed, fd)) {
            cancel_accept(ring, fd);
            retiring.push_back(std::move(*it));
        }
        listeners.erase(it);
    }
    for (UniqueFd& fd : change.added) {
        if (!acceptor.paused_) arm(fd.get());
        listeners.push_back(std::move(fd));
    }
    if (ended) arm_wake(ring, acceptor.wake_fd_.get());
    return true;
}

void Acceptor::UringLoop::on_accept(int listener, int result, bool ended) {
    if (ended) {
        std::erase(armed, listener);
        std::erase_if(retiring, [listener](const UniqueFd& l) { return l.get() == listener; });
    }
    if (result >= 0) {
        AcceptedSocket socket;
        socket.fd = result;
        socket.peer.length = sizeof socket.peer.storage;
        if (getpeername(result, &socket.peer.storage.any, &socket.peer.length) != 0)
            socket.peer.length = 0;
        acceptor.take_connection(socket, listener);
        if (ended && !acceptor.paused_ && acceptor.is_listener(listener)) arm(listener);
    } else if (result == -EMFILE || result == -ENFILE) {
        acceptor.shed_one(listener, -result);
        if (!acceptor.paused_) {
            // Back off: stop every accept, resume when the timeout fires.
            acceptor.paused_ = true;
            for (int fd : armed)
                cancel_accept(ring, fd);
            io_uring_sqe* sqe = ring.next_sqe();
            io_uring_prep_timeout(sqe, &pause, 0, 0);
            io_uring_sqe_set_data64(sqe, kPauseRequest);
        }
    } else if (result != -ECANCELED) {
        if (result != -ECONNABORTED && result != -EINTR && result != -EAGAIN)
            log_error("accept: %s", strerror(-result));
        if (ended && !acceptor.paused_ && acceptor.is_listener(listener)) arm(listener);
    }
}

} // namespace lepus
