// BackendPool: the per-reactor set of connections to one HTTP backend, its
// FIFO of requests waiting for a connection (one shared timeout, one timer),
// the tunnel slots of upgraded connections, and the gauges they publish.
// Apart from upstream.cc, which holds BackendConnection (the socket, the
// request bytes out and the response parsed in), so that each stays a
// readable size (issue 31); both implement proxy/upstream.h.
#include "proxy/upstream.h"

#include <algorithm>
#include <utility>

namespace lepus::proxy {

BackendPool::BackendPool(Reactor& reactor, BackendOptions options, UpstreamGauges* gauges)
    : reactor_(reactor), options_(std::move(options)), gauges_(gauges),
      queue_timer_(this, &BackendPool::on_queue_timer) {
    options_.connections = std::max<size_t>(1, options_.connections);
    for (size_t i = 0; i < options_.connections; ++i) {
        connections_.push_back(std::make_unique<BackendConnection>(*this, reactor_));
        closed_.push_back(connections_.back().get());
    }
}

BackendPool::~BackendPool() {
    add_to_gauges(-published_busy_, -published_idle_, -published_queued_, -published_tunnels_);
}

void BackendPool::close_all() {
    for (auto& connection : connections_) {
        connection->close_socket();
        connection->state_ = BackendConnection::State::Closed;
    }
    for (auto& tunnel : tunnels_) // freed when their clients release them
        tunnel->close_socket();
    idle_.clear();
    closed_.clear();
    for (auto& connection : connections_)
        closed_.push_back(connection.get());
    reactor_.timers().cancel(queue_timer_);
    publish_gauges();
}

void BackendPool::add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued, uint64_t tunnels) {
    if (!gauges_) return;
    auto add = [](std::atomic<uint64_t>& gauge, uint64_t delta) {
        gauge.store(gauge.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    };
    add(gauges_->busy, busy);
    add(gauges_->idle, idle);
    add(gauges_->queued, queued);
    add(gauges_->tunnels, tunnels);
}

void BackendPool::publish_gauges() {
    uint64_t busy = busy_connections(), idle = idle_.size(), queued = queue_size_;
    uint64_t tunnels = tunnels_.size();
    add_to_gauges(busy - published_busy_, idle - published_idle_, queued - published_queued_,
                  tunnels - published_tunnels_);
    published_busy_ = busy;
    published_idle_ = idle;
    published_queued_ = queued;
    published_tunnels_ = tunnels;
}

void BackendPool::acquire(BackendClient& client, bool upgrade) {
    client.refused_ = client.tunnels_full_ = false;
    if (upgrade && !client.tunnel_slot_) {
        if (tunnel_slots_taken_ >= options_.tunnels) {
            client.refused_ = client.tunnels_full_ = true;
            return;
        }
        ++tunnel_slots_taken_;
        client.tunnel_slot_ = true;
    }
    if (queue_size_ == 0) {
        if (!idle_.empty()) {
            BackendConnection* connection = idle_.back();
            idle_.pop_back();
            publish_gauges();
            return connection->attach(client);
        }
        if (!closed_.empty()) {
            BackendConnection* connection = closed_.back();
            closed_.pop_back();
            publish_gauges();
            return connection->attach(client);
        }
    }
    if (queue_size_ >= options_.queue_limit) {
        client.refused_ = true;
        return;
    }
    client.queued_ = true;
    client.queue_deadline_ = reactor_.now_ms() + options_.queue_timeout_ms;
    client.queue_next_ = nullptr;
    client.queue_prev_ = queue_tail_;
    if (queue_tail_)
        queue_tail_->queue_next_ = &client;
    else
        queue_head_ = &client;
    queue_tail_ = &client;
    ++queue_size_;
    arm_queue_timer();
    publish_gauges();
}

void BackendPool::release_tunnel_slot(BackendClient& client) {
    if (!client.tunnel_slot_) return;
    client.tunnel_slot_ = false;
    --tunnel_slots_taken_;
}

void BackendPool::cancel_wait(BackendClient& client) {
    if (!client.queued_) return;
    if (client.queue_prev_)
        client.queue_prev_->queue_next_ = client.queue_next_;
    else
        queue_head_ = client.queue_next_;
    if (client.queue_next_)
        client.queue_next_->queue_prev_ = client.queue_prev_;
    else
        queue_tail_ = client.queue_prev_;
    client.queue_prev_ = client.queue_next_ = nullptr;
    client.queued_ = false;
    --queue_size_;
    arm_queue_timer();
    publish_gauges();
}

BackendClient* BackendPool::pop_waiter() {
    BackendClient* client = queue_head_;
    if (client) cancel_wait(*client);
    return client;
}

void BackendPool::on_available(BackendConnection& connection) {
    if (BackendClient* client = pop_waiter()) return assign(connection, *client);
    if (connection.state_ == BackendConnection::State::Idle)
        idle_.push_back(&connection);
    else
        closed_.push_back(&connection);
    publish_gauges();
}

void BackendPool::on_idle_closed(BackendConnection& connection) {
    auto it = std::find(idle_.begin(), idle_.end(), &connection);
    if (it != idle_.end()) idle_.erase(it);
    closed_.push_back(&connection);
    publish_gauges();
}

void BackendPool::on_tunnel(BackendConnection& connection) {
    auto it = std::find_if(connections_.begin(), connections_.end(),
                           [&](const auto& each) { return each.get() == &connection; });
    if (it == connections_.end()) return;
    connection.detached_ = true;
    tunnels_.push_back(std::move(*it));
    // The replacement opens when a request needs it.
    *it = std::make_unique<BackendConnection>(*this, reactor_);
    on_available(**it);
    publish_gauges();
}

void BackendPool::on_tunnel_closed(BackendConnection& connection) {
    auto it = std::find_if(tunnels_.begin(), tunnels_.end(),
                           [&](const auto& each) { return each.get() == &connection; });
    if (it == tunnels_.end()) return;
    std::unique_ptr<BackendConnection> gone = std::move(*it);
    *it = std::move(tunnels_.back());
    tunnels_.pop_back();
    publish_gauges();
}

void BackendPool::assign(BackendConnection& connection, BackendClient& client) {
    connection.attach(client);
    client.on_backend_progress();
}

void BackendPool::arm_queue_timer() {
    if (queue_head_)
        reactor_.timers().schedule(queue_timer_, queue_head_->queue_deadline_);
    else
        reactor_.timers().cancel(queue_timer_);
}

void BackendPool::on_queue_timer(TimerEntry& entry) {
    BackendPool* pool = &OwnedTimerEntry<BackendPool>::owner_of(entry);
    uint64_t now = pool->reactor_.now_ms();
    while (pool->queue_head_ && pool->queue_head_->queue_deadline_ <= now) {
        BackendClient* client = pool->pop_waiter();
        client->refused_ = true;
        client->on_backend_progress(); // may close and free the client
    }
    pool->arm_queue_timer();
}

} // namespace lepus::proxy
