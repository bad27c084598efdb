// The per-reactor FastCGI client: a bounded set of backend connections to
// php-fpm, and a bounded FIFO of requests waiting for one.
//
// By default each request opens its own connection, closed as soon as
// END_REQUEST is read (no FCGI_KEEP_CONN, as nginx does): php-fpm binds a child
// to every connection it has accepted, so a kept-alive connection it has not
// accepted (more connections than pm.max_children) would hold its request in
// the listen backlog until --fastcgi-timeout (issue 32). With keep_alive
// (--fastcgi-keepalive on) connections return to an idle pool after END_REQUEST
// instead; the pool must then stay at or below pm.max_children.
//
// Everything runs on one reactor thread: no locks. An UpstreamConnection is an
// EventHandler registered in the same reactor as the HTTP connections
// (is_connection = false, so it does not count as a client). One request is in
// flight per backend connection (php-fpm does not multiplex). The HTTP side is
// an UpstreamClient: it is poked with on_upstream_progress() and pulls what is
// new (head, body bytes, end, failure) from its UpstreamConnection, so no
// callback ever runs the HTTP state machine from inside this one's loops.
//
// Waiters share one timeout, so the FIFO is also ordered by deadline and one
// TimerEntry in the pool covers them all (lwan's keepalive queue, lwan-tq.c).
#pragma once

#include "fastcgi/backend_address.h"
#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "log/error_log.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::fastcgi {

struct UpstreamOptions {
    BackendAddress address;
    size_t connections = 1;               // this reactor's share of --fastcgi-pool
    size_t queue_limit = 64;              // --fastcgi-queue
    uint64_t queue_timeout_ms = 10000;    // --fastcgi-queue-timeout
    uint64_t response_timeout_ms = 60000; // --fastcgi-timeout: silence from php-fpm
    uint64_t idle_timeout_ms = 30000;     // --fastcgi-idle-timeout
    bool keep_alive = false;              // --fastcgi-keepalive: FCGI_KEEP_CONN and an idle pool
};

// What one reactor's pools are doing, for the status page. A reactor may have
// several pools (one per backend); each adds what it holds into the same
// gauges. Written by the reactor thread only (load + store, no locked
// instruction), read by any thread.
struct UpstreamGauges {
    std::atomic<uint64_t> busy{0};    // connections serving or draining a request
    std::atomic<uint64_t> idle{0};    // open connections waiting in the pool
    std::atomic<uint64_t> queued{0};  // requests waiting for a connection
    std::atomic<uint64_t> tunnels{0}; // the proxy's only: backend connections a 101 made tunnels
};

// Why a request's backend exchange failed.
enum class UpstreamFailure : uint8_t {
    None,
    Connect,    // cannot connect (php-fpm down): 502
    Protocol,   // malformed record or CGI header block: 502
    Closed,     // connection closed or reset before END_REQUEST: 502 (or torn)
    Timeout,    // silent for --fastcgi-timeout: 504
    Overloaded, // END_REQUEST said OVERLOADED / CANT_MPX_CONN / UNKNOWN_ROLE: 502
};

class UpstreamConnection;
class UpstreamPool;

// The HTTP side of one FastCGI request (the client connection implements it).
class UpstreamClient {
public:
    // Something changed: a connection was assigned, the queue refused the
    // request, response bytes arrived, the response ended or failed, or STDIN
    // space freed up. May be called from inside the client's own calls into the
    // upstream: implementations only note it and re-run their state machine.
    virtual void on_upstream_progress() = 0;

    // The connection serving this client; nullptr while queued or after release().
    UpstreamConnection* upstream() const { return upstream_; }
    // The queue was full or the wait timed out: answer 503.
    bool upstream_refused() const { return refused_; }
    // Waiting in the pool's queue.
    bool upstream_queued() const { return queued_; }

    // The request's context for this connection's error lines (log/error_log.h).
    LogContext log_context;

protected:
    ~UpstreamClient() = default;

private:
    friend class UpstreamPool;
    friend class UpstreamConnection;
    UpstreamConnection* upstream_ = nullptr;
    UpstreamClient* queue_prev_ = nullptr;
    UpstreamClient* queue_next_ = nullptr;
    uint64_t queue_deadline_ = 0;
    bool queued_ = false;
    bool refused_ = false;
};

class UpstreamConnection final : public EventHandler {
public:
    static constexpr uint16_t kRequestId = 1;
    static constexpr size_t kReadBufferSize = size_t{64} * 1024;
    // STDIN bytes buffered for php-fpm before the client stops being read.
    static constexpr size_t kStdinHighWater = size_t{64} * 1024;
    // STDOUT bytes buffered for a slow client before php-fpm stops being read.
    static constexpr size_t kBodyHighWater = size_t{256} * 1024;

    UpstreamConnection(UpstreamPool& pool, Reactor& reactor);
    ~UpstreamConnection();

    // --- the request (client side) ---
    // Starts the request: BEGIN_REQUEST (KEEP_CONN with keep_alive) and an open PARAMS stream in
    // the write buffer. The caller adds the variables and calls finish().
    ParamsWriter& begin_request(std::string_view script_name);
    // Appends STDIN records carrying `data` (copied).
    void append_stdin(std::span<const char> data);
    // Appends the empty STDIN record that ends the body.
    void end_stdin();
    // Sends what is buffered; the first call sends BEGIN+PARAMS(+STDIN) in one write.
    void flush();
    // True when the STDIN buffer is over its bound: stop reading the client's body.
    bool stdin_full() const { return wbuf_.size() - wsent_ >= kStdinHighWater; }

    // --- the response ---
    // The CGI header block is complete: head() holds status and headers.
    bool head_ready() const { return head_done_; }
    const CgiResponseParser& head() const { return parser_; }
    // STDOUT body bytes received and not yet consumed.
    std::span<const char> body() const {
        return {body_.data() + body_pos_, body_.size() - body_pos_};
    }
    // Marks `n` body bytes as taken; resumes reading php-fpm below the bound.
    void consume_body(size_t n);
    // END_REQUEST arrived: body() is all there is.
    bool ended() const { return ended_; }
    UpstreamFailure failure() const { return failure_; }

    // The client is done with this connection (response consumed, failed, or
    // the client went away). A clean kept-alive connection returns to the pool; one whose
    // request was fully sent but whose response is still coming is drained
    // first (a client abort must not cost a backend connection, nor free a slot
    // while php-fpm still runs the script); anything else is closed.
    void release();

    void on_events(uint32_t events) override;
    void on_shutdown() override { close_socket(); }
    void on_force_close() override { close_socket(); }

private:
    friend class UpstreamPool;
    enum class State : uint8_t { Closed, Connecting, Active, Idle, Draining };

    void attach(UpstreamClient& client);
    void connect_socket();
    void close_socket();
    void read_available();
    void process_input();
    void handle_record(const Record& record);
    void on_io_error(int error, const char* what);
    void fail(UpstreamFailure failure, const char* reason);
    void fail_bad_head();
    void log_stderr(std::string_view text);
    std::string escaped_script() const;
    bool can_retry() const;
    void retry();
    void finish_draining();
    void arm_response_timer();
    void arm_timer(uint64_t timeout_ms);
    void notify();
    static void on_timer(TimerEntry& entry);

    UpstreamPool& pool_;
    Reactor& reactor_;
    UniqueFd fd_;
    OwnedTimerEntry<UpstreamConnection> timer_;
    uint64_t deadline_ = 0;
    UpstreamClient* client_ = nullptr;
    State state_ = State::Closed;

    std::string wbuf_; // request records; [wsent_, size) not yet sent
    size_t wsent_ = 0;
    ParamsWriter params_;
    std::string script_; // for STDERR and failure log lines

    std::unique_ptr<char[]> rbuf_;
    size_t rpos_ = 0, rend_ = 0;
    RecordDecoder decoder_;
    CgiResponseParser parser_;
    std::string body_;
    size_t body_pos_ = 0;

    UpstreamFailure failure_ = UpstreamFailure::None;
    bool head_done_ = false;
    bool ended_ = false;
    bool stdin_done_ = false;
    bool paused_ = false;     // body_ over its bound: php-fpm is not read
    bool readable_ = false;   // no EAGAIN since the last EPOLLIN edge
    bool reused_ = false;     // came from the idle pool: a dead one may be replaced
    bool replayable_ = false; // wbuf_ still holds every byte of the request
    bool received_ = false;   // any byte of the response arrived
    bool retried_ = false;
    bool reusable_ = true; // no trailing bytes after END_REQUEST
};

class UpstreamPool {
public:
    // `gauges` (optional) must outlive the pool.
    UpstreamPool(Reactor& reactor, UpstreamOptions options, UpstreamGauges* gauges = nullptr);
    // Only gives the fds back, never touches the reactor (it may be gone at exit):
    // a pool retired while its reactor runs calls close_all() first.
    ~UpstreamPool();
    UpstreamPool(const UpstreamPool&) = delete;
    UpstreamPool& operator=(const UpstreamPool&) = delete;

    // Gives `client` a connection now (client.upstream() set, possibly already
    // failed to connect), queues it (upstream_queued()), or refuses it
    // (upstream_refused(): the queue is full).
    void acquire(UpstreamClient& client);
    // Takes a queued client out of the queue (it went away).
    void cancel_wait(UpstreamClient& client);
    // Closes every backend connection (idle or draining an abandoned response)
    // and cancels the timers, on the reactor thread, so that the pool can then
    // be destroyed while the reactor runs (a SIGHUP replaced it). No client may
    // be attached or queued: their requests keep the pool alive.
    void close_all();

    const UpstreamOptions& options() const { return options_; }
    // Idle connections in the pool; for tests and logs.
    size_t idle_connections() const { return idle_.size(); }
    size_t queued() const { return queue_size_; }
    // Connections assigned to a request or draining one.
    size_t busy_connections() const { return connections_.size() - idle_.size() - closed_.size(); }

private:
    friend class UpstreamConnection;

    // A connection became available (idle or closed): serve the oldest waiter.
    void on_available(UpstreamConnection& connection);
    // An idle connection closed (timeout or php-fpm closed it).
    void on_idle_closed(UpstreamConnection& connection);
    void assign(UpstreamConnection& connection, UpstreamClient& client);
    UpstreamClient* pop_waiter();
    void arm_queue_timer();
    static void on_queue_timer(TimerEntry& entry);
    // Brings gauges_ up to date with this pool's counts (adds the differences).
    void publish_gauges();
    void add_to_gauges(uint64_t busy, uint64_t idle, uint64_t queued);

    Reactor& reactor_;
    UpstreamOptions options_;
    UpstreamGauges* gauges_;
    uint64_t published_busy_ = 0, published_idle_ = 0, published_queued_ = 0;
    std::vector<std::unique_ptr<UpstreamConnection>> connections_;
    std::vector<UpstreamConnection*> idle_;   // LIFO: the coldest ones time out
    std::vector<UpstreamConnection*> closed_; // slots without a socket
    UpstreamClient* queue_head_ = nullptr;
    UpstreamClient* queue_tail_ = nullptr;
    size_t queue_size_ = 0;
    OwnedTimerEntry<UpstreamPool> queue_timer_;
};

} // namespace lepus::fastcgi
