#include "upstream/backend_stream.h"

#include "log/error_log.h"

#include <algorithm>

namespace lepus::upstream {

BackendStream::BackendStream(Group& group, Exchange& exchange)
    : group_(group), exchange_(exchange) {
    group.key_of(exchange, key_);
    pool_ = &group.pick(exchange.now_ms, key_);
}

BackendStream::~BackendStream() {
    BackendStream::release();
}

void BackendStream::on_upstream_progress() {
    // Only a wake-up: the engine calls poll() from its own loop, where the
    // request's views are valid. This object may be gone when it returns.
    exchange_.listener->on_exchange_progress();
}

void BackendStream::acquire() {
    if (acquired_) return;
    acquired_ = true;
    pool_->acquire(*this, wants_tunnel());
}

StreamState BackendStream::send() {
    for (;;) {
        acquire();
        // The usual case inline: a connection, not queued nor refused.
        if (!connection() || queued() || refused())
            if (StreamState admitted = admission(); admitted != StreamState::Ready) return admitted;
        Connection& connection = *this->connection();
        if (!request_sent_) {
            request_sent_ = true;
            write_request(connection);
        }
        if (connection.failure() == Failure::None && connection.unsent()) connection.flush();
        if (connection.failure() == Failure::None) return StreamState::Ready;
        if (!fail_over()) return failed(connection.failure());
        request_sent_ = false;
    }
}

size_t BackendStream::offer_body(std::span<const char> data) {
    Connection* connection = this->connection();
    if (!request_sent_ || !connection || connection->failure() != Failure::None) return 0;
    if (connection->send_full()) {
        // Send before taking more: a send that empties the buffer raises no
        // EPOLLOUT edge to bring us back.
        connection->flush();
        if (connection->send_full()) return 0;
    }
    size_t take = std::min(data.size(), Connection::kSendHighWater);
    connection->append_body(data.first(take));
    return take;
}

void BackendStream::end_body() {
    body_ended_ = true;
    Connection* connection = this->connection();
    if (request_sent_ && connection && connection->failure() == Failure::None) {
        connection->end_body();
        connection->flush();
    }
}

StreamState BackendStream::poll() {
    // Once the whole request is out, only its answer is awaited (the usual
    // poll after the first): send() has nothing to do.
    Connection* sending = this->connection();
    if (!request_sent_ || !sending || sending->failure() != Failure::None || sending->unsent())
        if (StreamState state = send(); state != StreamState::Ready) return state;
    Connection& connection = *this->connection();
    if (!connection.head_ready()) return StreamState::Pending;
    if (!head_reported_) {
        take_head(connection);
        head_reported_ = true;
    }
    return StreamState::Ready;
}

StreamState BackendStream::admission() {
    if (refused()) {
        // Overload must not flood the log as well: one line per second per thread.
        static thread_local time_t last_warning = 0;
        if (exchange_.now_s != last_warning) {
            last_warning = exchange_.now_s;
            ScopedLogContext context(log_context);
            const char* protocol = pool_->names().protocol;
            const char* address = pool_->options().address.text.c_str();
            if (tunnels_full())
                log_warn("%s: %s has as many tunnels as --proxy-tunnels allows this reactor: 503",
                         protocol, address);
            else
                log_warn("%s: every connection to %s of this reactor is busy and its queue is "
                         "full or the wait timed out: 503",
                         protocol, address);
        }
        return failed(503, kRetryAfter);
    }
    if (queued()) return StreamState::Pending;
    if (!connection()) return failed(502);
    return StreamState::Ready;
}

StreamState BackendStream::failed(Failure failure) {
    return failed(failure == Failure::Timeout || failure == Failure::ConnectTimeout ? 504 : 502);
}

StreamState BackendStream::failed(int status, std::span<const Header> fields) {
    if (head_reported_) return StreamState::Broken;
    error_status_ = status;
    error_fields_ = fields;
    return StreamState::Failed;
}

bool is_idempotent(Method method) {
    switch (method) {
    case Method::Get:
    case Method::Head:
    case Method::Options:
    case Method::Trace:
    case Method::Put:
    case Method::Delete:
        return true;
    default:
        return false;
    }
}

bool BackendStream::fail_over() {
    Connection* connection = this->connection();
    if (!connection || attempts_ >= group_.size()) return false;
    Failure failure = connection->failure();
    bool unsent = failure == Failure::Connect || failure == Failure::ConnectTimeout;
    bool replay = failure == Failure::Closed && connection->request_intact() &&
                  is_idempotent(exchange_.request->method);
    if (!unsent && !replay) return false;
    resend_complete_ = connection->request_complete();
    resend_ = connection->take_request();
    ++attempts_;
    connection->release();
    pool_->release_tunnel_slot(*this);
    pool_ = &group_.pick(exchange_.now_ms, key_, pool_);
    acquired_ = false;
    ScopedLogContext context(log_context);
    log_info("%s: trying %s instead", pool_->names().protocol,
             pool_->options().address.text.c_str());
    return true;
}

std::span<const char> BackendStream::body() const {
    Connection* connection = this->connection();
    return connection ? connection->body() : std::span<const char>{};
}

void BackendStream::consume(size_t bytes) {
    if (Connection* connection = this->connection()) connection->consume_body(bytes);
}

bool BackendStream::ended() const {
    Connection* connection = this->connection();
    return connection && connection->ended();
}

void BackendStream::release() {
    if (released_) return;
    released_ = true;
    if (queued()) pool_->cancel_wait(*this);
    pool_->release_tunnel_slot(*this);
    if (Connection* connection = this->connection()) connection->release();
}

} // namespace lepus::upstream
