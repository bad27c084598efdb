// The io_uring backend of Poller (see net/poller.h): one multishot POLL_ADD per
// fd. Registrations and removals are submission entries that reach the kernel
// with the next wait, in the same io_uring_enter.
//
// Removal is the delicate part. Unlike epoll, a poll request holds its own
// reference to the file, so closing the fd does not end it: the socket stays
// open (no FIN) until the poll is cancelled. A cancel can miss a poll that is
// being woken at that moment (-EALREADY, -ENOENT), so a removed poll stays on
// the `cancelling_` list, and its cancel is sent again, until the completion
// without IORING_CQE_F_MORE says the poll is over.
#include "net/poller.h"
#include "net/uring.h"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

constexpr unsigned kSubmissionEntries = 1024;
constexpr unsigned kCompletionEntries = 16384;
// user_data of a cancel: the poll's own user_data with this bit set.
constexpr uint64_t kCancelBit = uint64_t{1} << 63;

class UringPoller final : public Poller {
public:
    bool init(std::string& error) {
        // Poll wake-ups are completed by task work on the reactor thread. By
        // default the kernel interrupts the thread for it (an IPI and a signal
        // -like notification per wake-up), which cost more than half the
        // throughput here. DEFER_TASKRUN (Linux 6.1, with SINGLE_ISSUER) runs it
        // only inside our io_uring_enter; COOP_TASKRUN (5.19) at least does not
        // interrupt. The ring starts disabled so that the reactor thread, not
        // the thread creating it, becomes its single issuer.
        constexpr unsigned kDeferred =
            IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
        constexpr unsigned kCooperative = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
        std::string ignored;
        if (ring_.init(kSubmissionEntries, kCompletionEntries, ignored, kDeferred)) {
            disabled_ = true;
            return true;
        }
        return ring_.init(kSubmissionEntries, kCompletionEntries, ignored, kCooperative) ||
               ring_.init(kSubmissionEntries, kCompletionEntries, error);
    }

    void attach_thread() override {
        // liburing 2.3 declares io_uring_enable_rings but does not export it.
        if (disabled_)
            syscall(__NR_io_uring_register, ring_.get()->ring_fd, IORING_REGISTER_ENABLE_RINGS,
                    nullptr, 0);
        disabled_ = false;
    }

    bool add(int fd, uint32_t events, uint64_t cookie, std::string&) override {
        if (size_t(fd) >= armed_.size()) armed_.resize(size_t(fd) + 1024);
        if (++generation_ >= 0x7fffffffu) generation_ = 1;
        armed_[fd] = {cookie, events & ~uint32_t(EPOLLET), generation_, true};
        arm(fd);
        return true;
    }

    void remove(int fd, uint64_t cookie, bool) override {
        if (size_t(fd) >= armed_.size() || !armed_[fd].watched || armed_[fd].cookie != cookie)
            return;
        armed_[fd].watched = false;
        // A poll that already ended (with an error) has nothing to cancel, and
        // a cancel of it would miss, and be sent again, for ever.
        if (!armed_[fd].in_kernel) return;
        cancelling_.push_back(key(fd));
        cancel(key(fd));
    }

    int wait(std::span<ReadyEvent> out, int timeout_ms) override {
        io_uring* ring = ring_.get();
        int rc;
        if (io_uring_cq_ready(ring) > 0) {
            rc = io_uring_submit(ring);
        } else if (timeout_ms == 0) {
            rc = io_uring_submit_and_get_events(ring); // runs deferred task work
        } else if (timeout_ms < 0) {
            rc = io_uring_submit_and_wait(ring, 1);
        } else {
            __kernel_timespec limit{timeout_ms / 1000, (timeout_ms % 1000) * 1000000LL};
            io_uring_cqe* first = nullptr;
            rc = io_uring_submit_and_wait_timeout(ring, &first, 1, &limit, nullptr);
            if (rc == -ETIME) rc = 0;
        }
        if (rc < 0 && rc != -EBUSY && rc != -EINTR) { // EBUSY: completions to reap first
            errno = -rc;
            return -1;
        }
        return reap(out);
    }

    IoBackend backend() const override { return IoBackend::Uring; }

private:
    // What is watched on one fd. The ring's user_data is (generation, fd), our
    // own, so a completion for an fd closed and reused since is recognised.
    struct Armed {
        uint64_t cookie = 0; // the caller's, returned with events
        uint32_t events = 0;
        uint32_t generation = 0;
        bool watched = false;
        bool in_kernel = false; // armed, and its last completion not seen yet
    };
    uint64_t key(int fd) const { return uint64_t(armed_[fd].generation) << 32 | uint32_t(fd); }

    void arm(int fd) {
        io_uring_sqe* sqe = ring_.next_sqe();
        io_uring_prep_poll_multishot(sqe, fd, armed_[fd].events);
        armed_[fd].in_kernel = true;
        io_uring_sqe_set_data64(sqe, key(fd));
    }

    void cancel(uint64_t poll) {
        io_uring_sqe* sqe = ring_.next_sqe();
        io_uring_prep_poll_remove(sqe, poll);
        io_uring_sqe_set_data64(sqe, poll | kCancelBit);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS; // success: the poll's -ECANCELED follows
    }

    bool is_cancelling(uint64_t poll) const {
        return std::find(cancelling_.begin(), cancelling_.end(), poll) != cancelling_.end();
    }

    // Moves completions into `out`; what does not fit stays for the next wait.
    int reap(std::span<ReadyEvent> out) {
        io_uring* ring = ring_.get();
        size_t n = 0;
        unsigned head, seen = 0;
        io_uring_cqe* cqe;
        io_uring_for_each_cqe(ring, head, cqe) {
            if (n == out.size()) break;
            ++seen;
            uint64_t user_data = cqe->user_data;
            bool ended = !(cqe->flags & IORING_CQE_F_MORE);
            if (user_data & kCancelBit) {
                // The cancel missed (the poll was being woken): try again
                // while the poll has not said it is over.
                uint64_t poll = user_data & ~kCancelBit;
                if (is_cancelling(poll)) cancel(poll);
                continue;
            }
            size_t fd = uint32_t(user_data);
            if (fd >= armed_.size() || !armed_[fd].watched || key(int(fd)) != user_data) {
                // Removed, or a completion for an earlier user of the fd.
                if (ended) std::erase(cancelling_, user_data);
                continue;
            }
            // A multishot poll also ends without being cancelled, with events
            // (when the completion queue overflowed): arm it again. Ended with an
            // error, it is not re-armed (that could spin): the owner hears
            // EPOLLERR and closes.
            if (ended) {
                if (cqe->res > 0)
                    arm(int(fd));
                else
                    armed_[fd].in_kernel = false;
            }
            uint32_t events = cqe->res > 0 ? uint32_t(cqe->res) : uint32_t(EPOLLERR | EPOLLHUP);
            out[n++] = {armed_[fd].cookie, events};
        }
        io_uring_cq_advance(ring, seen);
        return int(n);
    }

    Uring ring_;
    std::vector<Armed> armed_;
    std::vector<uint64_t> cancelling_; // removed polls not over yet
    uint32_t generation_ = 0;
    bool disabled_ = false; // created with IORING_SETUP_R_DISABLED, not enabled yet
};

} // namespace

std::unique_ptr<Poller> make_uring_poller(std::string& error) {
    auto poller = std::make_unique<UringPoller>();
    if (!poller->init(error)) return nullptr;
    return poller;
}

} // namespace lepus
