#include "net/poller.h"

namespace lepus {

std::unique_ptr<Poller> make_epoll_poller(std::string& error);
std::unique_ptr<Poller> make_uring_poller(std::string& error);

const char* io_backend_name(IoBackend backend) {
    return backend == IoBackend::Uring ? "uring" : "epoll";
}

std::optional<IoBackend> parse_io_backend(std::string_view text) {
    if (text == "epoll") return IoBackend::Epoll;
    if (text == "uring" || text == "io_uring") return IoBackend::Uring;
    return std::nullopt;
}

std::unique_ptr<Poller> make_poller(IoBackend backend, std::string& error) {
    return backend == IoBackend::Uring ? make_uring_poller(error) : make_epoll_poller(error);
}

} // namespace lepus
