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

void Acceptor::run_uring() {
    Uring ring;
    std::string error;
    // Created on the acceptor thread, its only issuer: completions are run in
    // our io_uring_enter instead of interrupting the thread (see uring_poller.cc).
    if (!ring.init(64, 4096, error, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) &&
        !ring.init(64, 4096, error)) {
        log_error("acceptor: %s", error.c_str());
        return;
    }
    // Which listeners have an accept in the kernel, until a completion without
    // IORING_CQE_F_MORE says it ended. A cancel can miss an accept that is
    // completing at that moment; it is sent again until the accept has ended.
    std::vector<int> armed;
    // Removed listeners whose accept still holds the socket: closed when it ends
    // (closing earlier would let a new listener reuse the fd number).
    std::vector<UniqueFd> retiring;
    auto is_retiring = [&](int fd) {
        return std::any_of(retiring.begin(), retiring.end(),
                           [fd](const UniqueFd& l) { return l.get() == fd; });
    };
    auto arm = [&](int listener) {
        if (contains(armed, listener)) return;
        arm_accept(ring, listener);
        armed.push_back(listener);
    };
    for (const UniqueFd& listener : listeners_)
        arm(listener.get());
    arm_wake(ring, wake_fd_.get());
    __kernel_timespec pause{options_.emfile_pause_ms / 1000,
                            (options_.emfile_pause_ms % 1000) * 1000000LL};

    for (;;) {
        int rc = io_uring_submit_and_wait(ring.get(), 1);
        if (rc < 0 && rc != -EINTR && rc != -EBUSY) {
            log_error("acceptor: io_uring_enter: %s", strerror(-rc));
            return;
        }
        unsigned head, seen = 0;
        io_uring_cqe* cqe;
        io_uring_for_each_cqe(ring.get(), head, cqe) {
            ++seen;
            uint64_t key = cqe->user_data;
            int res = cqe->res;
            bool ended = !(cqe->flags & IORING_CQE_F_MORE);
            if (key & kCancelBit && key != kWakeRequest && key != kPauseRequest) {
                int listener = int(key & ~kCancelBit);
                if (contains(armed, listener) && (paused_ || is_retiring(listener)))
                    cancel_accept(ring, listener);
                continue;
            }
            if (key == kWakeRequest) {
                if (stop_requested_.load()) return;
                ListenerChange change = take_changes();
                for (int fd : change.removed) {
                    auto it = std::find_if(listeners_.begin(), listeners_.end(),
                                           [fd](const UniqueFd& l) { return l.get() == fd; });
                    if (it == listeners_.end()) continue;
                    if (contains(armed, fd)) {
                        cancel_accept(ring, fd);
                        retiring.push_back(std::move(*it));
                    }
                    listeners_.erase(it);
                }
                for (UniqueFd& fd : change.added) {
                    if (!paused_) arm(fd.get());
                    listeners_.push_back(std::move(fd));
                }
                if (ended) arm_wake(ring, wake_fd_.get());
                continue;
            }
            if (key == kPauseRequest) {
                paused_ = false;
                for (const UniqueFd& listener : listeners_)
                    arm(listener.get());
                continue;
            }
            int listener = int(key);
            if (ended) {
                std::erase(armed, listener);
                std::erase_if(retiring,
                              [listener](const UniqueFd& l) { return l.get() == listener; });
            }
            if (res >= 0) {
                AcceptedSocket socket;
                socket.fd = res;
                socket.peer.length = sizeof socket.peer.storage;
                if (getpeername(res, &socket.peer.storage.any, &socket.peer.length) != 0)
                    socket.peer.length = 0;
                take_connection(socket);
                if (ended && !paused_ && is_listener(listener)) arm(listener);
            } else if (res == -EMFILE || res == -ENFILE) {
                shed_one(listener, -res);
                if (!paused_) {
                    // Back off: stop every accept, resume when the timeout fires.
                    paused_ = true;
                    for (int fd : armed)
                        cancel_accept(ring, fd);
                    io_uring_sqe* sqe = ring.next_sqe();
                    io_uring_prep_timeout(sqe, &pause, 0, 0);
                    io_uring_sqe_set_data64(sqe, kPauseRequest);
                }
            } else if (res != -ECANCELED) {
                if (res != -ECONNABORTED && res != -EINTR && res != -EAGAIN)
                    log_error("accept: %s", strerror(-res));
                if (ended && !paused_ && is_listener(listener)) arm(listener);
            }
        }
        io_uring_cq_advance(ring.get(), seen);
        wake_reactors();
    }
}

} // namespace lepus
