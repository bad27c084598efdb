// upstream::Pool: the per-reactor set of connections to one backend, its FIFO
// of requests waiting for a connection (one shared timeout, one timer), the
// tunnel slots of upgraded connections, and the gauges they publish.
#include "upstream/pool.h"

#include "log/error_log.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace lepus::upstream {

bool PoolOptions::operator==(const PoolOptions& other) const {
    if (max_fails != other.max_fails || fail_timeout_ms != other.fail_timeout_ms ||
        health_path != other.health_path || health_root != other.health_root ||
        health_interval_ms != other.health_interval_ms || health_fails != other.health_fails ||
        health_passes != other.health_passes)
        return false;
    return address.text == other.address.text && connections == other.connections &&
           tunnels == other.tunnels && queue_limit == other.queue_limit &&
           queue_timeout_ms == other.queue_timeout_ms &&
           connect_timeout_ms == other.connect_timeout_ms &&
           response_timeout_ms == other.response_timeout_ms &&
           idle_timeout_ms == other.idle_timeout_ms && keep_alive == other.keep_alive &&
           head_max == other.head_max;
}

void UpstreamGauges::add_backend(const std::shared_ptr<BackendGauges>& backend) {
    std::lock_guard lock(backends_mutex_);
    std::erase_if(backends_, [](const auto& each) { return each.expired(); });
    backends_.push_back(backend);
}

std::vector<std::shared_ptr<const BackendGauges>> UpstreamGauges::backends() const {
    std::vector<std::shared_ptr<const BackendGauges>> alive;
    std::lock_guard lock(backends_mutex_);
    for (const auto& each : backends_)
        if (auto backend = each.lock()) alive.push_back(std::move(backend));
    return alive;
}

Pool::Pool(Reactor& reactor, PoolOptions options, UpstreamGauges* gauges,
           const ProtocolNames& names)
    : reactor_(reactor), options_(std::move(options)), gauges_(gauges),
      backend_gauges_(std::make_shared<BackendGauges>(options_.address.text)), names_(names),
      queue_timer_(this, &Pool::on_queue_timer), health_timer_(this, &Pool::on_health_timer) {
    options_.connections = std::max<size_t>(1, options_.connections);
    if (gauges_) gauges_->add_backend(backend_gauges_);
    // Made on the reactor's thread (adopt_pools): the first check one interval from now.
    if (options_.health_interval_ms > 0)
        reactor_.timers().schedule(health_timer_, reactor_.now_ms() + options_.health_interval_ms);
}

Pool::~Pool() {
    // Unsigned wrap-around turns these additions into subtractions.
    add_to_gauges(-published_busy_, -published_idle_, -published_queued_, -published_tunnels_);
    if (gauges_ && published_down_)
        gauges_->down.store(gauges_->down.load(std::memory_order_relaxed) - 1,
                            std::memory_order_relaxed);
}

void Pool::close_all() {
    for (auto& connection : connections_) {
        connection->close_socket();
        connection->state_ = Connection::State::Closed;
    }
    for (auto& tunnel : tunnels_) // freed when their clients release them
        tunnel->close_socket();
    idle_.clear();
    closed_.clear();
    for (auto& connection : connections_)
        closed_.push_back(connection.get());
    reactor_.timers().cancel(queue_timer_);
    reactor_.timers().cancel(health_timer_);
    if (probe_) probe_->close_socket();
    publish_gauges();
}

void Pool::add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued, uint64_t tunnels) {
    if (!gauges_) return;
    auto add = [](std::atomic<uint64_t>& gauge, uint64_t delta) {
        gauge.store(gauge.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    };
    add(gauges_->busy, busy);
    add(gauges_->idle, idle);
    add(gauges_->queued, queued);
    add(gauges_->tunnels, tunnels);
}

void Pool::publish_health(bool failed) {
    auto add = [](std::atomic<uint64_t>& gauge, uint64_t delta) {
        gauge.store(gauge.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    };
    bool down = out_ || checked_out_;
    if (failed) add(backend_gauges_->failures, 1);
    backend_gauges_->down.store(down, std::memory_order_relaxed);
    if (!gauges_) return;
    if (failed) add(gauges_->failures, 1);
    if (down != published_down_) add(gauges_->down, down ? 1 : uint64_t(-1));
    published_down_ = down;
}

// Twice a request (a connection taken, then given back): only what changed
// is written.
void Pool::publish_gauges() {
    auto add = [](std::atomic<uint64_t>& gauge, uint64_t delta) {
        gauge.store(gauge.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    };
    uint64_t busy = busy_connections(), idle = idle_.size();
    if (busy != published_busy_) {
        backend_gauges_->in_flight.store(busy, std::memory_order_relaxed);
        if (gauges_) add(gauges_->busy, busy - published_busy_);
        published_busy_ = busy;
    }
    if (idle != published_idle_) {
        if (gauges_) add(gauges_->idle, idle - published_idle_);
        published_idle_ = idle;
    }
    if (queue_size_ != published_queued_ || tunnels_.size() != published_tunnels_) {
        add_to_gauges(0, 0, queue_size_ - published_queued_, tunnels_.size() - published_tunnels_);
        published_queued_ = queue_size_;
        published_tunnels_ = tunnels_.size();
    }
}

void Pool::acquire(Client& client, bool upgrade) {
    client.refused_ = client.tunnels_full_ = false;
    // The usual case (no upgrade, nobody waiting, a connection at hand) apart
    // from the rest, so that it saves none of the registers the rest needs.
    if (!upgrade && queue_size_ == 0) {
        std::vector<Connection*>& spare = idle_.empty() ? closed_ : idle_;
        if (!spare.empty()) {
            Connection* connection = spare.back();
            spare.pop_back();
            publish_gauges();
            return connection->attach(client);
        }
    }
    acquire_otherwise(client, upgrade);
}

void Pool::acquire_otherwise(Client& client, bool upgrade) {
    if (upgrade && !client.tunnel_slot_) {
        if (tunnel_slots_taken_ >= options_.tunnels) {
            client.refused_ = client.tunnels_full_ = true;
            return;
        }
        ++tunnel_slots_taken_;
        client.tunnel_slot_ = true;
    }
    if (queue_size_ == 0) {
        // Warm connections first; a new socket only when none is idle.
        Connection* connection = nullptr;
        if (!idle_.empty()) {
            connection = idle_.back();
            idle_.pop_back();
        } else if (!closed_.empty()) {
            connection = closed_.back();
            closed_.pop_back();
        } else if (connections_.size() < options_.connections) {
            connections_.push_back(make_connection());
            connection = connections_.back().get();
        }
        if (connection) {
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

void Pool::cancel_wait(Client& client) {
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

Client* Pool::pop_waiter() {
    Client* client = queue_head_;
    if (client) cancel_wait(*client);
    return client;
}

void Pool::on_available(Connection& connection) {
    if (Client* client = pop_waiter()) return assign(connection, *client);
    // A connection still connecting (its client left) waits with the idle ones.
    if (connection.state_ == Connection::State::Idle ||
        connection.state_ == Connection::State::Connecting)
        idle_.push_back(&connection);
    else
        closed_.push_back(&connection);
    publish_gauges();
}

void Pool::on_idle_closed(Connection& connection) {
    auto it = std::find(idle_.begin(), idle_.end(), &connection);
    if (it != idle_.end()) idle_.erase(it);
    closed_.push_back(&connection);
    publish_gauges();
}

void Pool::on_tunnel(Connection& connection) {
    auto it = std::find_if(connections_.begin(), connections_.end(),
                           [&](const auto& each) { return each.get() == &connection; });
    if (it == connections_.end()) return;
    connection.detached_ = true;
    tunnels_.push_back(std::move(*it));
    *it = std::move(connections_.back());
    connections_.pop_back();
    // The slot it left opens a connection for the oldest waiter, if any.
    if (queue_head_) {
        connections_.push_back(make_connection());
        assign(*connections_.back(), *pop_waiter());
    }
    publish_gauges();
}

void Pool::on_tunnel_closed(Connection& connection) {
    auto it = std::find_if(tunnels_.begin(), tunnels_.end(),
                           [&](const auto& each) { return each.get() == &connection; });
    if (it == tunnels_.end()) return;
    std::unique_ptr<Connection> gone = std::move(*it);
    *it = std::move(tunnels_.back());
    tunnels_.pop_back();
    publish_gauges();
}

void Pool::assign(Connection& connection, Client& client) {
    connection.attach(client);
    client.on_upstream_progress();
}

// nginx's max_fails within fail_timeout (ngx_http_upstream_free_round_robin_peer):
// the window starts at the first failure; reaching max_fails in it takes the
// backend out for fail_timeout. One error-log line when it goes out.
void Pool::note_failure(const char* reason) {
    uint64_t now = reactor_.now_ms();
    publish_health(true);
    if (failures_ == 0 || now - first_failure_ms_ > options_.fail_timeout_ms) {
        failures_ = 0;
        first_failure_ms_ = now;
    }
    if (++failures_ < std::max(1u, options_.max_fails)) return;
    if (!checked_out_) back_since_ms = down_until_ms = now + options_.fail_timeout_ms;
    failures_ = 0;
    if (!out_)
        log_error("%s %s: taken out for %llu ms after %u failure(s) within %llu ms, the last: %s",
                  names_.protocol, options_.address.text.c_str(),
                  static_cast<unsigned long long>(options_.fail_timeout_ms),
                  std::max(1u, options_.max_fails),
                  static_cast<unsigned long long>(options_.fail_timeout_ms), reason);
    out_ = true;
    publish_health(false);
}

void Pool::note_answer_slow() {
    failures_ = 0;
    if (!out_) return;
    out_ = false;
    if (!checked_out_) {
        // Answered before its fail_timeout was over (every backend was out).
        back_since_ms = std::min(back_since_ms, reactor_.now_ms());
        down_until_ms = 0;
    }
    publish_health(false);
    log_warn("%s %s: answers again, back in", names_.protocol, options_.address.text.c_str());
}

// Active health: a check every interval on the probe connection; one still
// unanswered when the next is due has failed.
void Pool::on_health_timer(TimerEntry& entry) {
    Pool* pool = &OwnedTimerEntry<Pool>::owner_of(entry);
    if (pool->probe_client_.connection()) pool->probe_done(false, "no answer within the interval");
    pool->start_probe();
    pool->reactor_.timers().schedule(pool->health_timer_,
                                     pool->reactor_.now_ms() + pool->options_.health_interval_ms);
}

void Pool::start_probe() {
    if (!probe_) {
        probe_ = make_connection();
        probe_->probe_ = true;
    }
    probe_->attach(probe_client_);
    probe_->write_probe(options_.health_path, options_.health_root);
    probe_->flush();
    on_probe_progress(); // a connect that failed at once
}

void Pool::on_probe_progress() {
    Connection* probe = probe_client_.connection();
    if (!probe) return;
    if (probe->failure() != Failure::None) return probe_done(false, "no connection or no answer");
    if (!probe->head_ready()) return;
    int status = probe->response_status();
    char why[48];
    std::snprintf(why, sizeof why, "status %d", status);
    probe_done(status >= 200 && status < 400, why);
}

void Pool::probe_done(bool passed, const char* why) {
    if (Connection* probe = probe_client_.connection()) probe->release();
    backend_gauges_->last_check_ms.store(reactor_.now_ms(), std::memory_order_relaxed);
    backend_gauges_->last_check_passed.store(passed, std::memory_order_relaxed);
    if (passed) {
        check_fails_ = 0;
        if (!checked_out_ || ++check_passes_ < std::max(1u, options_.health_passes)) return;
        checked_out_ = false;
        down_until_ms = 0;
        back_since_ms = reactor_.now_ms();
        publish_health(false);
        log_warn("%s %s: health check passed %u time(s), back in", names_.protocol,
                 options_.address.text.c_str(), std::max(1u, options_.health_passes));
        return;
    }
    check_passes_ = 0;
    publish_health(true);
    if (checked_out_ || ++check_fails_ < std::max(1u, options_.health_fails)) return;
    checked_out_ = true;
    down_until_ms = UINT64_MAX;
    publish_health(false);
    log_error("%s %s: health check of %s failed %u time(s) (%s), taken out", names_.protocol,
              options_.address.text.c_str(), options_.health_path.c_str(),
              std::max(1u, options_.health_fails), why);
}

void Pool::arm_queue_timer() {
    if (queue_head_)
        reactor_.timers().schedule(queue_timer_, queue_head_->queue_deadline_);
    else
        reactor_.timers().cancel(queue_timer_);
}

void Pool::on_queue_timer(TimerEntry& entry) {
    Pool* pool = &OwnedTimerEntry<Pool>::owner_of(entry);
    uint64_t now = pool->reactor_.now_ms();
    // Everyone shares one timeout, so the expired waiters are at the front.
    while (pool->queue_head_ && pool->queue_head_->queue_deadline_ <= now) {
        Client* client = pool->pop_waiter();
        client->refused_ = true;
        client->on_upstream_progress(); // may close and free the client
    }
    pool->arm_queue_timer();
}

} // namespace lepus::upstream
