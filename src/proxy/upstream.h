// The per-reactor HTTP/1.1 client of the reverse proxy: connections to one
// backend kept alive in a pool, and a bounded FIFO of requests waiting for
// one. The same design as the FastCGI pool (fastcgi/upstream.h): one reactor
// thread, no locks, one request in flight per backend connection, the HTTP
// side (a BackendClient) only poked with on_backend_progress() and pulling
// what is new, waiters sharing one timeout so one TimerEntry covers them.
//
// What differs is the wire: the request head and body go out as HTTP/1.1
// (the body re-chunked when the client sent it chunked), and the response is
// parsed as HTTP/1.1 (proxy/response_head.h), its body de-framed (Content-
// Length, chunked through http/chunked_decoder.h, or until close) into
// body(), which the client consumes with back-pressure.
#pragma once

#include "fastcgi/backend_address.h"
#include "fastcgi/upstream.h"
#include "http/chunked_decoder.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "proxy/response_head.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::proxy {

using fastcgi::BackendAddress;
using fastcgi::UpstreamGauges;

struct BackendOptions {
    BackendAddress address;
    size_t connections = 1;               // this reactor's share of --proxy-pool
    size_t tunnels = 1024;                // this reactor's share of --proxy-tunnels
    size_t queue_limit = 1024;            // --proxy-queue
    uint64_t queue_timeout_ms = 10000;    // --proxy-queue-timeout
    uint64_t connect_timeout_ms = 5000;   // --proxy-connect-timeout
    uint64_t response_timeout_ms = 60000; // --proxy-timeout: silence from the backend
    uint64_t idle_timeout_ms = 30000;     // --proxy-idle-timeout
    size_t head_max = size_t{16} * 1024;  // --proxy-head-max: a larger response head is a 502
};

// Why a request's backend exchange failed.
enum class BackendFailure : uint8_t {
    None,
    Connect,  // cannot connect (refused, unreachable): 502, the backend is skipped a while
    Protocol, // malformed response head or body framing, head too large: 502
    Closed,   // closed or reset before the response ended: 502 (or torn)
    Timeout,  // connect or response timeout: 504
};

class BackendConnection;
class BackendPool;

// The client side of one proxied request (ProxyExchange implements it).
class BackendClient {
public:
    // Something changed (assigned, refused, bytes arrived, ended, failed, room
    // to send). May be called from inside the client's own calls.
    virtual void on_backend_progress() = 0;

    BackendConnection* backend() const { return backend_; }
    bool backend_refused() const { return refused_; }
    bool backend_queued() const { return queued_; }
    // Refused because the backend's tunnels (or upgrades waiting for a 101) are at the limit.
    bool backend_tunnels_full() const { return tunnels_full_; }

    // The request's context for this connection's error lines (log/error_log.h).
    LogContext log_context;

protected:
    ~BackendClient() = default;

private:
    friend class BackendPool;
    friend class BackendConnection;
    BackendConnection* backend_ = nullptr;
    BackendClient* queue_prev_ = nullptr;
    BackendClient* queue_next_ = nullptr;
    uint64_t queue_deadline_ = 0;
    bool queued_ = false;
    bool refused_ = false;
    bool tunnel_slot_ = false; // holds one of the pool's tunnel slots
    bool tunnels_full_ = false;
};

class BackendConnection final : public EventHandler {
public:
    static constexpr size_t kReadBufferSize = size_t{64} * 1024;
    // Request bytes buffered for the backend before the client stops being read.
    static constexpr size_t kSendHighWater = size_t{64} * 1024;
    // Response body bytes buffered for a slow client before the backend stops being read.
    static constexpr size_t kBodyHighWater = size_t{256} * 1024;

    BackendConnection(BackendPool& pool, Reactor& reactor);
    ~BackendConnection();

    // --- the request ---
    // Starts the request with its head (copied). `head_request`: the response
    // has no body; `replayable`: an idempotent request that may be sent again
    // on a new connection when a pooled one turns out dead (RFC 9110 §9.2.2);
    // `upgrade`: the request asks to switch protocols, so a 101 makes the
    // connection a tunnel (any other 101 is the backend's error).
    void begin_request(std::string_view head, bool head_request, bool replayable,
                       bool upgrade = false);
    // A 101 answered the upgrade: body() carries the backend's raw bytes and
    // append_body(data, false) the client's, until ended() (a close).
    bool tunnel() const { return framing_ == BodyFraming::Tunnel; }
    // Appends body bytes (copied), in chunks when `chunked`.
    void append_body(std::span<const char> data, bool chunked);
    // The body is complete (the last chunk when `chunked`).
    void end_body(bool chunked);
    void flush();
    bool send_full() const { return wbuf_.size() - wsent_ >= kSendHighWater; }
    // After a Connect failure (nothing was sent): every request byte so far,
    // for another backend; and whether the body was complete.
    std::string take_request() {
        wsent_ = 0;
        return std::move(wbuf_);
    }
    bool body_complete() const { return body_done_; }

    // --- the response ---
    bool head_ready() const { return head_done_; }
    const ResponseHead& head() const { return head_; }
    std::span<const char> body() const {
        return {body_.data() + body_pos_, body_.size() - body_pos_};
    }
    void consume_body(size_t n);
    bool ended() const { return ended_; }
    BackendFailure failure() const { return failure_; }
    const BackendAddress& address() const;

    // The client is done: a clean connection returns to the pool, one whose
    // request was sent but whose response still comes is drained first,
    // anything else is closed.
    void release();

    void on_events(uint32_t events) override;
    void on_shutdown() override { close_socket(); }
    void on_force_close() override { close_socket(); }

private:
    friend class BackendPool;
    enum class State : uint8_t { Closed, Connecting, Active, Idle, Draining };

    void attach(BackendClient& client);
    void connect_socket();
    void close_socket();
    void read_available();
    void process_input();
    bool take_body(std::span<const char> data, size_t& used);
    void on_io_error(int error, const char* what);
    void fail(BackendFailure failure, const char* reason);
    bool can_retry() const;
    void retry();
    void finish_draining();
    void arm_response_timer();
    void arm_timer(uint64_t timeout_ms);
    void notify();
    static void on_timer(TimerEntry& entry);

    BackendPool& pool_;
    Reactor& reactor_;
    UniqueFd fd_;
    OwnedTimerEntry<BackendConnection> timer_;
    uint64_t deadline_ = 0;
    BackendClient* client_ = nullptr;
    State state_ = State::Closed;

    std::string wbuf_; // request bytes; [wsent_, size) not yet sent
    size_t wsent_ = 0;

    std::unique_ptr<char[]> rbuf_;
    size_t rpos_ = 0, rend_ = 0;
    ResponseHead head_;
    BodyFraming framing_ = BodyFraming::None;
    uint64_t left_ = 0; // Length: body bytes still to come
    ChunkedDecoder chunks_;
    std::string body_;
    size_t body_pos_ = 0;

    BackendFailure failure_ = BackendFailure::None;
    bool head_request_ = false;
    bool upgrade_ = false; // the request asked to switch protocols
    bool head_done_ = false;
    bool ended_ = false;
    bool body_done_ = false;  // the whole request is in wbuf_ (or sent)
    bool paused_ = false;     // body_ over its bound: the backend is not read
    bool readable_ = false;   // no EAGAIN since the last EPOLLIN edge
    bool reused_ = false;     // came from the idle pool
    bool replayable_ = false; // wbuf_ still holds every byte of an idempotent request
    bool received_ = false;   // any byte of the response arrived
    bool retried_ = false;
    bool reusable_ = true;
    bool detached_ = false; // a tunnel: out of the pool, freed on release()
};

class BackendPool {
public:
    BackendPool(Reactor& reactor, BackendOptions options, UpstreamGauges* gauges = nullptr);
    ~BackendPool();
    BackendPool(const BackendPool&) = delete;
    BackendPool& operator=(const BackendPool&) = delete;

    // Gives `client` a connection now, queues it, or refuses it (queue full).
    // `upgrade`: the request may become a tunnel, so it first takes one of the
    // backend's tunnel slots (options().tunnels), refused when none is left.
    void acquire(BackendClient& client, bool upgrade = false);
    void cancel_wait(BackendClient& client);
    // Gives back the client's tunnel slot, if it holds one (it is done, or
    // tries another backend).
    void release_tunnel_slot(BackendClient& client);
    // Closes every connection and cancels the timers (see fastcgi::UpstreamPool).
    void close_all();

    const BackendOptions& options() const { return options_; }
    size_t idle_connections() const { return idle_.size(); }
    size_t queued() const { return queue_size_; }
    size_t busy_connections() const { return connections_.size() - idle_.size() - closed_.size(); }
    // Tunnels open (a 101 came), which hold no pool connection.
    size_t tunnels() const { return tunnels_.size(); }

    // Passive health: a backend that refused a connection is skipped until then.
    uint64_t down_until_ms = 0;

private:
    friend class BackendConnection;

    void on_available(BackendConnection& connection);
    void on_idle_closed(BackendConnection& connection);
    void on_tunnel(BackendConnection& connection);
    void on_tunnel_closed(BackendConnection& connection);
    void assign(BackendConnection& connection, BackendClient& client);
    BackendClient* pop_waiter();
    void arm_queue_timer();
    static void on_queue_timer(TimerEntry& entry);
    void publish_gauges();
    void add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued, uint64_t tunnels);

    Reactor& reactor_;
    BackendOptions options_;
    UpstreamGauges* gauges_;
    uint64_t published_busy_ = 0, published_idle_ = 0, published_queued_ = 0;
    uint64_t published_tunnels_ = 0;
    std::vector<std::unique_ptr<BackendConnection>> connections_;
    // Connections a 101 turned into tunnels: out of connections_, so the pool
    // opens others for requests (issue 32: 40 silent WebSockets took 32 of 32).
    std::vector<std::unique_ptr<BackendConnection>> tunnels_;
    size_t tunnel_slots_taken_ = 0; // tunnels plus upgrades waiting for their answer
    std::vector<BackendConnection*> idle_;
    std::vector<BackendConnection*> closed_;
    BackendClient* queue_head_ = nullptr;
    BackendClient* queue_tail_ = nullptr;
    size_t queue_size_ = 0;
    OwnedTimerEntry<BackendPool> queue_timer_;
};

} // namespace lepus::proxy
