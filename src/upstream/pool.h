// The per-reactor client of one backend, written once for every protocol
// (nginx's upstream core, h2o's socketpool): a bounded set of connections
// kept alive in a pool, a bounded FIFO of requests waiting for one (the
// admission: a full queue or an expired wait is a fast refusal, which the
// exchange answers 503 with Retry-After), a connect timeout, a response
// timeout, the drain of an abandoned response, the replay of an idempotent
// request on a pooled connection the backend closed while idle, and gauges
// for the status page.
//
// A protocol (fastcgi/upstream.h, proxy/upstream.h) derives a Connection
// that encodes its requests into wbuf_ and parses rbuf_ in process_input(),
// and a Pool that makes such connections; everything about sockets, timers,
// back-pressure and the queue lives here.
//
// Everything runs on one reactor thread: no locks. A Connection is an
// EventHandler registered in the same reactor as the HTTP connections
// (is_connection = false, so it does not count as a client). One request is
// in flight per backend connection. The HTTP side is a Client: it is poked
// with on_upstream_progress() and pulls what is new (head, body bytes, end,
// failure) from its Connection, so no callback ever runs the HTTP state
// machine from inside this one's loops.
//
// Waiters share one timeout, so the FIFO is also ordered by deadline and one
// TimerEntry in the pool covers them all (lwan's keepalive queue, lwan-tq.c).
#pragma once

#include "log/error_log.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "upstream/backend_address.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace lepus::upstream {

struct PoolOptions {
    BackendAddress address;
    size_t connections = 1;               // this reactor's share of the pool size
    size_t tunnels = 0;                   // connections a 101 may take out of the pool
    size_t queue_limit = 64;              // requests waiting for a connection
    uint64_t queue_timeout_ms = 10000;    // how long one may wait
    uint64_t connect_timeout_ms = 5000;   // a connect that hangs (a dead host, a full backlog)
    uint64_t response_timeout_ms = 60000; // silence from the backend
    uint64_t idle_timeout_ms = 30000;     // a pooled connection unused this long is closed
    bool keep_alive = true;               // connections return to an idle pool
    size_t head_max = size_t{16} * 1024;  // the proxy's: a larger response head is a 502
    // Passive health (nginx's max_fails and fail_timeout): this many failures
    // (no connection, or closed before an answer) within fail_timeout_ms take
    // the backend out for fail_timeout_ms.
    unsigned max_fails = 1;
    uint64_t fail_timeout_ms = 10000;
    // Active health (`health = { path, interval, fails, passes }`): every
    // health_interval_ms (0: none) a request for health_path (FastCGI: that
    // script under health_root) on a connection of its own; an answer
    // outside 2xx/3xx, or none within the interval, fails. health_fails
    // failed checks in a row take the backend out, health_passes passed ones
    // bring it back.
    std::string health_path, health_root;
    uint64_t health_interval_ms = 0;
    unsigned health_fails = 2, health_passes = 2;

    bool operator==(const PoolOptions& other) const;
};

// How a protocol names itself and its flags in error-log lines.
struct ProtocolNames {
    const char* protocol;             // "FastCGI"
    const char* timeout_flag;         // "--fastcgi-timeout"
    const char* connect_timeout_flag; // "--fastcgi-connect-timeout"
};

// One backend as one reactor's pool sees it, for the status page's list of
// backends. Written by the pool's reactor thread (load + store), read by the
// status page's; the pool and UpstreamGauges' list share it, so a pool that a
// reload retired drops out of the list with its last owner.
struct BackendGauges {
    explicit BackendGauges(std::string backend_address) : address(std::move(backend_address)) {}
    const std::string address;
    std::atomic<uint64_t> in_flight{0}; // connections serving or draining a request
    std::atomic<uint64_t> failures{0};  // failed connections and health checks, since start
    std::atomic<bool> down{false};      // taken out (max_fails, or its health checks)
    // The last active health check (the reactor's clock; 0: none yet) and its verdict.
    std::atomic<uint64_t> last_check_ms{0};
    std::atomic<bool> last_check_passed{false};
};

// What one reactor's pools are doing, for the status page. A reactor may have
// several pools (one per backend); each adds what it holds into the same
// gauges. Written by the reactor thread only (load + store, no locked
// instruction), read by any thread.
struct UpstreamGauges {
    std::atomic<uint64_t> busy{0};     // connections serving or draining a request
    std::atomic<uint64_t> idle{0};     // open connections waiting in the pool
    std::atomic<uint64_t> queued{0};   // requests waiting for a connection
    std::atomic<uint64_t> tunnels{0};  // backend connections a 101 made tunnels
    std::atomic<uint64_t> down{0};     // backends taken out (max_fails, or their health checks)
    std::atomic<uint64_t> failures{0}; // failed connections and health checks, since start

    // Each pool's own figures (a pool adds its own when it is made, on its
    // reactor thread; a reload is rare enough for a lock).
    void add_backend(const std::shared_ptr<BackendGauges>& backend);
    // Those of the pools alive now.
    std::vector<std::shared_ptr<const BackendGauges>> backends() const;

private:
    mutable std::mutex backends_mutex_;
    std::vector<std::weak_ptr<const BackendGauges>> backends_;
};

// Why a request's backend exchange failed.
enum class Failure : uint8_t {
    None,
    Connect,        // cannot connect (refused, unreachable): 502, the backend is skipped a while
    Protocol,       // malformed response (record, head, framing): 502
    Closed,         // closed or reset before the response ended: 502 (or torn)
    ConnectTimeout, // the connect did not complete in time: 504, the backend is skipped a while
    Timeout,        // response timeout: 504
    Overloaded,     // the backend refused the request (FastCGI's END_REQUEST status): 502
};

class Connection;
class Pool;

// The HTTP side of one backend request (an exchange implements it).
class Client {
public:
    // Something changed: a connection was assigned, the queue refused the
    // request, response bytes arrived, the response ended or failed, or send
    // space freed up. May be called from inside the client's own calls into
    // the upstream: implementations only note it and re-run their state machine.
    virtual void on_upstream_progress() = 0;

    // The connection serving this client; nullptr while queued or after release().
    Connection* connection() const { return connection_; }
    // The queue was full or the wait timed out (or no tunnel slot): answer 503.
    bool refused() const { return refused_; }
    // Refused because the backend's tunnels are at their limit.
    bool tunnels_full() const { return tunnels_full_; }
    // Waiting in the pool's queue.
    bool queued() const { return queued_; }

    // The request's context for its connection's error lines (log/error_log.h):
    // the client, site, request line and backend, as nginx's "while connecting to upstream".
    LogContext log_context;

protected:
    ~Client() = default;

private:
    friend class Pool;
    friend class Connection;
    Connection* connection_ = nullptr;
    Client* queue_prev_ = nullptr;
    Client* queue_next_ = nullptr;
    uint64_t queue_deadline_ = 0;
    bool queued_ = false;
    bool refused_ = false;
    bool tunnel_slot_ = false; // holds one of the pool's tunnel slots
    bool tunnels_full_ = false;
};

class Connection : public EventHandler {
public:
    static constexpr size_t kReadBufferSize = size_t{64} * 1024;
    // Request bytes buffered for the backend before the client stops being read.
    static constexpr size_t kSendHighWater = size_t{64} * 1024;
    // Response body bytes buffered for a slow client before the backend stops being read.
    static constexpr size_t kBodyHighWater = size_t{256} * 1024;

    Connection(Pool& pool, Reactor& reactor);
    virtual ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Sends what is buffered; the first call sends the whole request head in one write.
    void flush();
    // Request bytes buffered and not yet sent.
    bool unsent() const { return wsent_ < wbuf_.size(); }
    // True when the send buffer is over its bound: stop reading the client's body.
    bool send_full() const { return wbuf_.size() - wsent_ >= kSendHighWater; }
    // The request body in the protocol's framing (FastCGI's STDIN records,
    // HTTP/1.1 chunks when the client's body came chunked): bytes (copied)...
    virtual void append_body(std::span<const char> data) = 0;
    // ...and their end.
    virtual void end_body() = 0;
    // Response body bytes received and not yet consumed.
    std::span<const char> body() const {
        return {body_.data() + body_pos_, body_.size() - body_pos_};
    }
    // Marks `n` body bytes as taken; resumes reading the backend below the bound.
    void consume_body(size_t n);
    // The response is complete: body() is all there is.
    bool ended() const { return ended_; }
    // The response head was parsed.
    bool head_ready() const { return head_done_; }
    Failure failure() const { return failure_; }
    const BackendAddress& address() const;
    // After a Connect failure (nothing was sent): every request byte so far,
    // for another backend; and whether the request was complete.
    std::string take_request() {
        wsent_ = 0;
        return std::move(wbuf_);
    }
    bool request_complete() const { return request_done_; }
    // The send buffer still holds every byte of the request and no byte of
    // the answer came: the request may go to another backend.
    bool request_intact() const { return replayable_; }

    // The client is done with this connection (response consumed, failed, or
    // the client went away). A clean kept-alive connection returns to the
    // pool; one whose request was fully sent but whose response is still
    // coming is drained first (a client abort must not cost a backend
    // connection, nor free a slot while the backend still works on it); one
    // still connecting is kept for the next request; anything else is closed.
    void release();

    void on_events(uint32_t events) override;
    void on_shutdown() override { close_socket(); }
    void on_force_close() override { close_socket(); }

protected:
    enum class State : uint8_t { Closed, Connecting, Active, Idle, Draining };

    // --- the protocol's part ---
    // Forgets the response parser's state (a new request, or the replay of one).
    virtual void reset_response() = 0;
    // Parses one step of rbuf_[rpos_, rend_) (a record, the head, a run of
    // body bytes), advancing rpos_ (all of it when more input is needed):
    // sets head_done_, appends body bytes to body_, sets ended_ (and clears
    // reusable_ when the connection cannot carry another request), or
    // fail()s. The caller checks back-pressure between steps.
    virtual void process_input() = 0;
    // The backend closed cleanly after the head: true when that ends the
    // response (an HTTP body delimited by the close).
    virtual bool ends_at_close() const { return false; }
    // Whether an abandoned response may be drained to keep the connection.
    virtual bool drainable() const { return true; }
    // Appended to failure lines in the error log (FastCGI: the script).
    virtual std::string log_context() const { return {}; }
    // Writes the whole request of an active health check for `path`
    // (`root`: the folder a FastCGI script is in).
    virtual void write_probe(std::string_view path, std::string_view root) = 0;
    // The answer's status, once head_ready().
    virtual int response_status() const = 0;

    // Starts a request in the send buffer. `replayable`: it may be sent again
    // on a new connection if a pooled one turns out dead (nothing came back).
    void begin(bool replayable);
    // Starts a request with bytes another connection of the group could not
    // send (its connect failed); `complete`: the whole request is there.
    void begin_with(std::string bytes, bool replayable, bool complete);
    // Before appending `n` more request bytes: past kSendHighWater the request
    // is no longer kept whole for a replay.
    void reserve_append(size_t n);
    void fail(Failure failure, const char* reason);
    // A 101 made this a tunnel: it leaves the pool (which may open another
    // connection for requests) and is freed on release().
    void become_tunnel();
    void close_socket();
    void arm_response_timer();
    const ProtocolNames& names() const;

    Pool& pool_;
    Reactor& reactor_;
    Client* client_ = nullptr;
    State state_ = State::Closed;

    std::string wbuf_; // request bytes; [wsent_, size) not yet sent
    size_t wsent_ = 0;
    std::unique_ptr<char[]> rbuf_;
    size_t rpos_ = 0, rend_ = 0;
    std::string body_;
    size_t body_pos_ = 0;

    Failure failure_ = Failure::None;
    bool head_done_ = false;
    bool ended_ = false;
    bool request_done_ = false; // the whole request is in wbuf_ (or sent)
    bool paused_ = false;       // body_ over its bound: the backend is not read
    bool reusable_ = true;      // may carry another request after this one
    bool detached_ = false;     // a tunnel: out of the pool, freed on release()

private:
    friend class Pool;

    void attach(Client& client);
    void connect_socket();
    void read_available();
    void on_connected();
    void on_io_error(int error, const char* what);
    bool can_retry() const;
    void retry();
    void finish_draining();
    void become_idle();
    void drop_spare();
    void arm_timer(uint64_t timeout_ms);
    void notify();
    static void on_timer(TimerEntry& entry);

    UniqueFd fd_;
    OwnedTimerEntry<Connection> timer_;
    uint64_t deadline_ = 0;
    bool readable_ = false;   // no EAGAIN since the last EPOLLIN edge
    bool reused_ = false;     // came from the idle pool: a dead one may be replaced
    bool replayable_ = false; // wbuf_ still holds every byte of a replayable request
    bool received_ = false;   // any byte of the response arrived
    bool retried_ = false;
    bool probe_ = false; // an active health check's: never in the pool's lists
};

class Pool {
public:
    // `gauges` (optional) and `names` must outlive the pool.
    Pool(Reactor& reactor, PoolOptions options, UpstreamGauges* gauges, const ProtocolNames& names);
    // Only gives the fds back, never touches the reactor (it may be gone at exit):
    // a pool retired while its reactor runs calls close_all() first.
    virtual ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // Gives `client` a connection now (client.connection() set, possibly
    // already failed to connect), queues it (queued()), or refuses it
    // (refused(): the queue is full). `upgrade`: the request may become a
    // tunnel, so it first takes one of options().tunnels slots.
    void acquire(Client& client, bool upgrade = false);
    // Takes a queued client out of the queue (it went away).
    void cancel_wait(Client& client);
    // Gives back the client's tunnel slot, if it holds one (inline: every
    // request's release asks, and almost none holds one).
    void release_tunnel_slot(Client& client) {
        if (!client.tunnel_slot_) return;
        client.tunnel_slot_ = false;
        --tunnel_slots_taken_;
    }
    // Closes every backend connection (idle or draining an abandoned response)
    // and cancels the timers, on the reactor thread, so that the pool can then
    // be destroyed while the reactor runs (a SIGHUP replaced it). No client may
    // be attached or queued: their requests keep the pool alive.
    void close_all();

    const PoolOptions& options() const { return options_; }
    const ProtocolNames& names() const { return names_; }
    Reactor& reactor() const { return reactor_; }
    // Idle connections in the pool (connecting ones included); for tests and logs.
    size_t idle_connections() const { return idle_.size(); }
    size_t queued() const { return queue_size_; }
    // Connections assigned to a request or draining one.
    size_t busy_connections() const { return connections_.size() - idle_.size() - closed_.size(); }
    // Tunnels open (a 101 came), which hold no pool connection.
    size_t tunnels() const { return tunnels_.size(); }

    // Passive health: a backend that failed max_fails times is skipped until then.
    uint64_t down_until_ms = 0;
    // When the backend was last back in (0: never out): the balancing eases
    // it in from then (Group's slow start). A passive take-out sets it to
    // down_until_ms, when the backend is tried again.
    uint64_t back_since_ms = 0;
    // A connection to the backend failed (`reason` for the error log).
    void note_failure(const char* reason);
    // An answer came: the failures are forgotten, and a backend taken out is back.
    void note_answer() {
        if (failures_ != 0 || out_) note_answer_slow();
    }
    // Failures counted in the current window.
    unsigned failures() const { return failures_; }
    // Out by the active health check (until enough checks pass).
    bool checked_out() const { return checked_out_; }

protected:
    // A new connection of the protocol's kind, for this pool.
    virtual std::unique_ptr<Connection> make_connection() = 0;

private:
    friend class Connection;

    // A connection became available (idle or closed): serve the oldest waiter.
    void on_available(Connection& connection);
    // An idle connection closed (timeout, or the backend closed it).
    void on_idle_closed(Connection& connection);
    // A 101 made `connection` a tunnel: it leaves the pool, which may open another.
    void on_tunnel(Connection& connection);
    void on_tunnel_closed(Connection& connection);
    void assign(Connection& connection, Client& client);
    // acquire() when no idle or closed connection can be taken at once:
    // an upgrade's tunnel slot, a new connection, the queue or a refusal.
    [[gnu::noinline]] void acquire_otherwise(Client& client, bool upgrade);
    Client* pop_waiter();
    void arm_queue_timer();
    static void on_queue_timer(TimerEntry& entry);
    void note_answer_slow();
    // --- active health ---
    class ProbeClient final : public Client {
    public:
        explicit ProbeClient(Pool& pool) : pool_(pool) {}
        void on_upstream_progress() override { pool_.on_probe_progress(); }

    private:
        Pool& pool_;
    };
    static void on_health_timer(TimerEntry& entry);
    void start_probe();
    void on_probe_progress();
    void probe_done(bool passed, const char* why);
    // Brings gauges_ up to date with this pool's counts (adds the differences).
    void publish_gauges();
    void add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued, uint64_t tunnels);
    // A failure counted, and the backend's state (out or in) brought up to date.
    void publish_health(bool failed);

    Reactor& reactor_;
    PoolOptions options_;
    UpstreamGauges* gauges_;
    std::shared_ptr<BackendGauges> backend_gauges_; // this backend's, for the status page
    const ProtocolNames& names_;
    uint64_t published_busy_ = 0, published_idle_ = 0, published_queued_ = 0;
    uint64_t published_tunnels_ = 0;
    bool published_down_ = false;
    // Made on first use, up to options_.connections.
    std::vector<std::unique_ptr<Connection>> connections_;
    // Connections a 101 turned into tunnels: out of connections_, so the pool
    // opens others for requests (issue 32: 40 silent WebSockets took 32 of 32).
    std::vector<std::unique_ptr<Connection>> tunnels_;
    size_t tunnel_slots_taken_ = 0;   // tunnels plus upgrades waiting for their answer
    std::vector<Connection*> idle_;   // LIFO: the coldest ones time out
    std::vector<Connection*> closed_; // slots without a socket
    Client* queue_head_ = nullptr;
    Client* queue_tail_ = nullptr;
    size_t queue_size_ = 0;
    OwnedTimerEntry<Pool> queue_timer_;
    unsigned failures_ = 0;
    uint64_t first_failure_ms_ = 0;
    bool out_ = false;                  // taken out by note_failure, not yet answered since
    std::unique_ptr<Connection> probe_; // made at the first check, reused
    ProbeClient probe_client_{*this};
    OwnedTimerEntry<Pool> health_timer_;
    unsigned check_fails_ = 0, check_passes_ = 0;
    bool checked_out_ = false;
};

} // namespace lepus::upstream
