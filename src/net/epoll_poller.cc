// The epoll backend of Poller (see net/poller.h).
#include "base/unique_fd.h"
#include "net/poller.h"

#include <cerrno>
#include <cstring>
#include <sys/epoll.h>
#include <vector>

namespace lepus {
namespace {

class EpollPoller final : public Poller {
public:
    bool init(std::string& error) {
        epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
        if (!epoll_fd_) error = std::string("epoll_create1: ") + strerror(errno);
        return bool(epoll_fd_);
    }

    bool add(int fd, uint32_t events, uint64_t cookie, std::string& error) override {
        epoll_event event{events | EPOLLET, {.u64 = cookie}};
        if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event) == 0) return true;
        error = "epoll_ctl(ADD, " + std::to_string(fd) + "): " + strerror(errno);
        return false;
    }

    void remove(int fd, uint64_t, bool closing) override {
        // The kernel takes a closed fd out of the set by itself (lepus never
        // dups them), so a closing fd costs no epoll_ctl.
        if (!closing) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
    }

    int wait(std::span<ReadyEvent> out, int timeout_ms) override {
        if (events_.size() < out.size()) events_.resize(out.size());
        int n = epoll_wait(epoll_fd_.get(), events_.data(), int(out.size()), timeout_ms);
        for (int i = 0; i < n; ++i)
            out[i] = {events_[i].data.u64, events_[i].events};
        return n;
    }

    IoBackend backend() const override { return IoBackend::Epoll; }

private:
    UniqueFd epoll_fd_;
    std::vector<epoll_event> events_;
};

} // namespace

std::unique_ptr<Poller> make_epoll_poller(std::string& error) {
    auto poller = std::make_unique<EpollPoller>();
    if (!poller->init(error)) return nullptr;
    return poller;
}

} // namespace lepus
