// upstream::Pool and its queue on a real reactor, against real backends on
// 127.0.0.1: a line protocol (one request line, one answer line) stands for
// FastCGI and HTTP, which only change what process_input() parses.
#include "upstream/pool.h"

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <gtest/gtest.h>
#include <mutex>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lepus::upstream {
namespace {

using namespace std::chrono_literals;

constexpr ProtocolNames kNames{"line", "--line-timeout", "--line-connect-timeout"};

// The protocol: the request is one line; the answer is one line, its body.
class LineConnection final : public Connection {
public:
    using Connection::Connection;
    void send(const std::string& line) {
        begin(true);
        reserve_append(line.size() + 1);
        wbuf_.append(line).push_back('\n');
        request_done_ = true;
        flush();
    }
    // Requests are one line each: no body.
    void append_body(std::span<const char>) override {}
    void end_body() override {}

private:
    void write_probe(std::string_view path, std::string_view) override { send(std::string(path)); }
    int response_status() const override { return body_.starts_with("ok:") ? 200 : 500; }
    void reset_response() override {}
    void process_input() override {
        std::string_view input(rbuf_.get() + rpos_, rend_ - rpos_);
        size_t newline = input.find('\n');
        size_t take = newline == std::string_view::npos ? input.size() : newline + 1;
        body_.append(input.substr(0, take));
        rpos_ += take;
        if (newline != std::string_view::npos) head_done_ = ended_ = true;
    }
};

class LinePool final : public Pool {
public:
    LinePool(Reactor& reactor, PoolOptions options, UpstreamGauges* gauges = nullptr)
        : Pool(reactor, std::move(options), gauges, kNames) {}

private:
    std::unique_ptr<Connection> make_connection() override {
        return std::make_unique<LineConnection>(*this, reactor());
    }
};

// A backend on 127.0.0.1: a thread per connection answers "ok:<line>" to each
// line. `gate_closed` holds the answers back until open_gate(); with
// `close_on_second` a connection is closed, unanswered, at its second request
// (a backend that dropped a kept-alive connection as the request came).
class LineBackend {
public:
    explicit LineBackend(int backlog = 64) {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
        ::listen(listener_, backlog);
        socklen_t length = sizeof address;
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
        port_ = ntohs(address.sin_port);
    }
    ~LineBackend() { stop(); }

    // Accepts and serves connections from now on.
    void start() {
        acceptor_ = std::thread([this] {
            for (;;) {
                int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
                if (fd < 0) return;
                accepted.fetch_add(1);
                std::lock_guard lock(mutex_);
                if (stopping_) {
                    ::close(fd);
                    return;
                }
                fds_.push_back(fd);
                threads_.emplace_back([this, fd] { serve(fd); });
            }
        });
    }
    void stop() {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
            stopping_ = true;
            gate_open_ = true;
            for (int fd : fds_)
                ::shutdown(fd, SHUT_RDWR);
        }
        gate_.notify_all();
        ::shutdown(listener_, SHUT_RDWR);
        if (acceptor_.joinable()) acceptor_.join();
        for (std::thread& thread : threads_)
            thread.join();
        for (int fd : fds_)
            ::close(fd);
        ::close(listener_);
    }
    void open_gate() {
        std::lock_guard lock(mutex_);
        gate_open_ = true;
        gate_.notify_all();
    }
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

    bool gate_closed = false;
    bool close_on_second = false;
    std::atomic<int> accepted{0};
    std::atomic<int> requests{0};

private:
    void serve(int fd) {
        std::string input;
        char buffer[4096];
        int served = 0;
        for (;;) {
            ssize_t n = ::read(fd, buffer, sizeof buffer);
            if (n <= 0) return;
            input.append(buffer, size_t(n));
            size_t newline;
            while ((newline = input.find('\n')) != std::string::npos) {
                std::string line = input.substr(0, newline);
                input.erase(0, newline + 1);
                if (close_on_second && ++served == 2) {
                    ::shutdown(fd, SHUT_RDWR);
                    return;
                }
                requests.fetch_add(1);
                if (gate_closed) {
                    std::unique_lock lock(mutex_);
                    gate_.wait(lock, [this] { return gate_open_; });
                }
                std::string answer = "ok:" + line + "\n";
                if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return;
            }
        }
    }

    int listener_ = -1;
    uint16_t port_ = 0;
    std::thread acceptor_;
    std::mutex mutex_;
    std::condition_variable gate_;
    bool gate_open_ = false;
    bool stopping_ = false;
    std::vector<int> fds_;
    std::vector<std::thread> threads_;
};

// One request as an exchange makes it: acquire, send, read the answer, release.
class LineClient final : public Client {
public:
    LineClient(LinePool& pool, std::string line) : pool_(pool), line_(std::move(line)) {}

    void start() {
        pool_.acquire(*this);
        step();
    }
    // The client goes away before its answer (the request was sent).
    void abandon() {
        if (queued()) pool_.cancel_wait(*this);
        if (Connection* connection = this->connection()) connection->release();
        finish(0);
    }
    void on_upstream_progress() override { step(); }

    // 200 and the answer, 503 refused, 502 failed, 504 timed out.
    std::future<int> result() { return promise_.get_future(); }
    std::string answer;

private:
    void step() {
        if (done_) return;
        if (refused()) return finish(503);
        if (queued()) return;
        auto* connection = static_cast<LineConnection*>(this->connection());
        if (!connection) return finish(502);
        if (!sent_) {
            sent_ = true;
            connection->send(line_);
        }
        if (connection->failure() != Failure::None) {
            Failure failure = connection->failure();
            int status =
                failure == Failure::Timeout || failure == Failure::ConnectTimeout ? 504 : 502;
            connection->release();
            return finish(status);
        }
        if (!connection->ended()) return;
        answer.assign(connection->body().data(), connection->body().size());
        connection->consume_body(answer.size());
        connection->release();
        finish(200);
    }
    void finish(int status) {
        if (done_) return;
        done_ = true;
        promise_.set_value(status);
    }

    LinePool& pool_;
    std::string line_;
    std::promise<int> promise_;
    bool sent_ = false;
    bool done_ = false;
};

class PoolTest : public ::testing::Test {
protected:
    void SetUp() override {
        reactor_ = std::make_unique<Reactor>(
            ReactorOptions{}, load_, live_, [](Reactor&, const AcceptedSocket&, void*) {}, nullptr);
        std::string error;
        ASSERT_TRUE(reactor_->init(error)) << error;
        thread_ = std::thread([this] { reactor_->run(); });
    }
    void TearDown() override {
        on_reactor([this] {
            for (auto& pool : pools_)
                pool->close_all();
        });
        reactor_->request_stop();
        thread_.join();
        clients_.clear();
        pools_.clear();
    }

    // Runs `task` on the reactor thread and waits for it.
    void on_reactor(std::function<void()> task) {
        std::promise<void> done;
        reactor_->post([&] {
            task();
            done.set_value();
        });
        done.get_future().wait();
    }
    LinePool& make_pool(PoolOptions options) {
        pools_.push_back(std::make_unique<LinePool>(*reactor_, std::move(options), &gauges_));
        return *pools_.back();
    }
    static PoolOptions options_for(const std::string& address) {
        PoolOptions options;
        options.address = *parse_backend_address(address);
        options.connect_timeout_ms = 2000;
        options.response_timeout_ms = 10000;
        return options;
    }
    // Starts a request on the reactor; its result() says how it ended.
    LineClient& request(LinePool& pool, std::string line) {
        clients_.push_back(std::make_unique<LineClient>(pool, std::move(line)));
        LineClient& client = *clients_.back();
        futures_.push_back(client.result());
        on_reactor([&client] { client.start(); });
        return client;
    }
    size_t idle_of(LinePool& pool) {
        size_t idle = 0;
        on_reactor([&] { idle = pool.idle_connections(); });
        return idle;
    }
    // Polls `condition` (run on the test thread) for up to 5 s.
    bool eventually(const std::function<bool()>& condition) {
        for (int i = 0; i < 500; ++i) {
            if (condition()) return true;
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }
    int status_of(size_t index) {
        std::future<int>& future = futures_[index];
        if (future.wait_for(10s) != std::future_status::ready) return -1;
        return future.get();
    }

    ReactorLoad load_;
    std::atomic<int64_t> live_{0};
    std::unique_ptr<Reactor> reactor_;
    std::thread thread_;
    UpstreamGauges gauges_;
    std::vector<std::unique_ptr<LinePool>> pools_;
    std::vector<std::unique_ptr<LineClient>> clients_;
    std::vector<std::future<int>> futures_;
};

TEST_F(PoolTest, KeptAliveConnectionServesTheNextRequests) {
    LineBackend backend;
    backend.start();
    LinePool& pool = make_pool(options_for(backend.address()));
    for (int i = 0; i < 3; ++i) {
        LineClient& client = request(pool, "r" + std::to_string(i));
        ASSERT_EQ(status_of(size_t(i)), 200);
        EXPECT_EQ(client.answer, "ok:r" + std::to_string(i) + "\n");
    }
    EXPECT_EQ(backend.accepted.load(), 1);
    size_t idle = 0;
    on_reactor([&] { idle = pool.idle_connections(); });
    EXPECT_EQ(idle, 1u);
    EXPECT_EQ(gauges_.idle.load(), 1u);
    EXPECT_EQ(gauges_.busy.load(), 0u);
}

// The admission: past the queue's limit a request is refused at once (the
// exchange's fast 503), and the waiting ones are served in order.
TEST_F(PoolTest, FullQueueRefusesAtOnceAndWaitersAreServedInOrder) {
    LineBackend backend;
    backend.gate_closed = true;
    backend.start();
    PoolOptions options = options_for(backend.address());
    options.connections = 1;
    options.queue_limit = 2;
    LinePool& pool = make_pool(options);
    request(pool, "a");
    request(pool, "b");
    request(pool, "c");
    request(pool, "d");
    EXPECT_EQ(status_of(3), 503);
    size_t queued = 0, busy = 0;
    on_reactor([&] { queued = pool.queued(), busy = pool.busy_connections(); });
    EXPECT_EQ(queued, 2u);
    EXPECT_EQ(busy, 1u);
    EXPECT_EQ(gauges_.queued.load(), 2u);
    EXPECT_EQ(gauges_.busy.load(), 1u);
    backend.open_gate();
    for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(status_of(i), 200) << i;
    EXPECT_EQ(clients_[1]->answer, "ok:b\n");
    EXPECT_EQ(clients_[2]->answer, "ok:c\n");
    EXPECT_EQ(backend.accepted.load(), 1);
    EXPECT_EQ(gauges_.queued.load(), 0u);
}

TEST_F(PoolTest, WaitPastTheQueueTimeoutIsRefused) {
    LineBackend backend;
    backend.gate_closed = true;
    backend.start();
    PoolOptions options = options_for(backend.address());
    options.connections = 1;
    options.queue_timeout_ms = 50;
    LinePool& pool = make_pool(options);
    request(pool, "a");
    request(pool, "b");
    EXPECT_EQ(status_of(1), 503);
    backend.open_gate();
    EXPECT_EQ(status_of(0), 200);
}

// A client that leaves after sending its request does not cost a connection:
// the answer is drained and the connection serves the next request.
TEST_F(PoolTest, AbandonedResponseIsDrainedAndTheConnectionReused) {
    LineBackend backend;
    backend.gate_closed = true;
    backend.start();
    PoolOptions options = options_for(backend.address());
    options.connections = 1;
    LinePool& pool = make_pool(options);
    LineClient& first = request(pool, "a");
    while (backend.requests.load() == 0)
        std::this_thread::sleep_for(1ms);
    on_reactor([&] { first.abandon(); });
    size_t busy = 0;
    on_reactor([&] { busy = pool.busy_connections(); });
    EXPECT_EQ(busy, 1u); // draining: the slot is not free before the answer
    backend.open_gate();
    request(pool, "b");
    EXPECT_EQ(status_of(1), 200);
    EXPECT_EQ(clients_[1]->answer, "ok:b\n");
    EXPECT_EQ(backend.accepted.load(), 1);
}

// A pooled connection the backend drops as the request arrives: the request
// is sent again on a new connection, and the client never knows.
TEST_F(PoolTest, RequestOnADroppedPooledConnectionIsRetriedOnANewOne) {
    LineBackend backend;
    backend.close_on_second = true;
    backend.start();
    LinePool& pool = make_pool(options_for(backend.address()));
    request(pool, "a");
    ASSERT_EQ(status_of(0), 200);
    request(pool, "b");
    ASSERT_EQ(status_of(1), 200);
    EXPECT_EQ(clients_[1]->answer, "ok:b\n");
    EXPECT_EQ(backend.accepted.load(), 2);
}

TEST_F(PoolTest, RefusedConnectionFailsAndMarksTheBackendDown) {
    int port = 0;
    {
        LineBackend closed; // bound, then closed: nothing listens there
        port = std::stoi(closed.address().substr(10));
    }
    LinePool& pool = make_pool(options_for("127.0.0.1:" + std::to_string(port)));
    request(pool, "a");
    EXPECT_EQ(status_of(0), 502);
    uint64_t down = 0;
    on_reactor([&] { down = pool.down_until_ms; });
    EXPECT_GT(down, 0u);
}

// Passive health: max_fails failures within fail_timeout take the backend
// out, fewer do not; an answer forgets them.
TEST_F(PoolTest, MaxFailsWithinFailTimeoutTakeTheBackendOut) {
    int port = 0;
    {
        LineBackend closed;
        port = std::stoi(closed.address().substr(10));
    }
    PoolOptions options = options_for("127.0.0.1:" + std::to_string(port));
    options.max_fails = 3;
    options.fail_timeout_ms = 60000;
    LinePool& pool = make_pool(options);
    uint64_t down = 0;
    for (size_t i = 0; i < 2; ++i)
        request(pool, "a");
    EXPECT_EQ(status_of(0), 502);
    EXPECT_EQ(status_of(1), 502);
    on_reactor([&] { down = pool.down_until_ms; });
    EXPECT_EQ(down, 0u); // two of three: still in
    request(pool, "a");
    EXPECT_EQ(status_of(2), 502);
    on_reactor([&] { down = pool.down_until_ms; });
    EXPECT_GT(down, 0u);
}

// Fills `backend`'s accept queue (made with a backlog of 0, not started):
// further SYNs are dropped, so connects hang until it accepts.
std::vector<int> fill_backlog(const LineBackend& backend) {
    std::vector<int> fillers;
    for (int i = 0; i < 4; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(uint16_t(std::stoi(backend.address().substr(10))));
        ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
        fillers.push_back(fd);
    }
    std::this_thread::sleep_for(50ms);
    return fillers;
}

// A connect that hangs (a backlog that is full) ends at the connect timeout
// with 504, well before the response timeout.
TEST_F(PoolTest, ConnectThatHangsTimesOut) {
    LineBackend backend(0); // never started: nothing is accepted
    std::vector<int> fillers = fill_backlog(backend);
    PoolOptions options = options_for(backend.address());
    options.connect_timeout_ms = 200;
    options.response_timeout_ms = 60000;
    LinePool& pool = make_pool(options);
    request(pool, "a");
    EXPECT_EQ(status_of(0), 504);
    for (int fd : fillers)
        ::close(fd);
}

// A client that leaves while its connection is still connecting (an HTTP/2
// stream reset at once) leaves the socket to the next request (issue 32).
TEST_F(PoolTest, ConnectionReleasedWhileConnectingIsKept) {
    LineBackend backend(0);
    std::vector<int> fillers = fill_backlog(backend);
    PoolOptions options = options_for(backend.address());
    options.connect_timeout_ms = 10000;
    LinePool& pool = make_pool(options);
    LineClient& first = request(pool, "a");
    on_reactor([&] { first.abandon(); });
    size_t idle = 0, busy = 0;
    on_reactor([&] { idle = pool.idle_connections(), busy = pool.busy_connections(); });
    EXPECT_EQ(idle, 1u); // kept (still connecting), not closed
    EXPECT_EQ(busy, 0u);
    backend.start(); // the backlog drains; the SYN's retry completes the connect
    request(pool, "b");
    EXPECT_EQ(status_of(1), 200);
    EXPECT_EQ(clients_[1]->answer, "ok:b\n");
    EXPECT_EQ(backend.requests.load(), 1);
    for (int fd : fillers)
        ::close(fd);
}

// Without keepalive (FastCGI's default: php-fpm binds a child to each
// connection it accepts), a connection its client left while it was still
// connecting waits for the next request only until the connect completes:
// then it is closed, not held idle on a php-fpm child. Its slot serves the
// next request.
TEST_F(PoolTest, ConnectionReleasedWhileConnectingIsClosedOnceConnectedWithoutKeepalive) {
    LineBackend backend(0);
    std::vector<int> fillers = fill_backlog(backend);
    PoolOptions options = options_for(backend.address());
    options.keep_alive = false;
    options.connect_timeout_ms = 10000;
    LinePool& pool = make_pool(options);
    LineClient& first = request(pool, "a");
    on_reactor([&] { first.abandon(); });
    EXPECT_EQ(idle_of(pool), 1u); // still connecting: kept for a request
    backend.start();              // the connect completes with nobody for it
    EXPECT_TRUE(eventually([&] { return idle_of(pool) == 0; }));
    EXPECT_EQ(backend.requests.load(), 0);
    request(pool, "b");
    EXPECT_EQ(status_of(1), 200);
    EXPECT_EQ(clients_[1]->answer, "ok:b\n");
    for (int fd : fillers)
        ::close(fd);
}

// A connection left while connecting whose connect then times out is closed
// and its slot given back: the next request tries a connect of its own (504
// at its own timeout), rather than waiting in the queue for a slot.
TEST_F(PoolTest, ConnectionReleasedWhileConnectingThatTimesOutGivesItsSlotBack) {
    LineBackend backend(0); // never started
    std::vector<int> fillers = fill_backlog(backend);
    PoolOptions options = options_for(backend.address());
    options.connect_timeout_ms = 200;
    options.queue_timeout_ms = 60000;
    LinePool& pool = make_pool(options);
    LineClient& first = request(pool, "a");
    on_reactor([&] { first.abandon(); });
    EXPECT_TRUE(eventually([&] { return idle_of(pool) == 0; }));
    size_t busy = 1;
    on_reactor([&] { busy = pool.busy_connections(); });
    EXPECT_EQ(busy, 0u);
    request(pool, "b");
    EXPECT_EQ(status_of(1), 504);
    for (int fd : fillers)
        ::close(fd);
}

} // namespace
} // namespace lepus::upstream
