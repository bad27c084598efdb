// Http1Engine: the HTTP/1.1 protocol of one connection (RFC 9112), between a
// Transport (bytes) and an ExchangeHandler (the router and its handlers).
//
// It reads until the transport would block, feeds the parser, hands each
// complete head to the handler as an Exchange, and writes the answer: a
// complete Response (head and memory body in one writev, a file range with
// send_file), or a ResponseStream framed as it arrives (Content-Length when
// known, else chunked, or close-delimited for HTTP/1.0). Request bodies are
// read with their framing removed (Content-Length or chunked) and either
// offered to the stream or dropped, so that the next request on the
// connection starts at the right byte. Pipelined requests are answered in
// order; 100-continue is sent only when the engine would otherwise wait for
// the body (RFC 9110 §10.1.1); a stream whose head is a 101 the client asked
// for (StreamHead::upgrade: WebSocket through the proxy) turns the connection
// into a byte tunnel (Phase::Tunnel); a connection closed with unread input lingers
// first (nginx's lingering close), so that the kernel's RST cannot destroy
// the response.
//
// One wake-up serves at most kMaxRequestsPerPass requests or kMaxBytesPerPass
// bytes, then drive() answers Yield and the owner runs it again after the
// other connections of its loop.
//
// Timeouts: the engine says which deadline applies now (deadline()) and the
// owner keeps one timer for it; see Http1Engine::plan_deadline for the
// phase-to-timeout mapping. The engine needs no reactor: a unit test drives
// it over a socketpair with a LoopClock of its own.
#pragma once

#include "http/chunked_decoder.h"
#include "http/exchange.h"
#include "http/min_rate.h"
#include "http/request_parser.h"
#include "net/loop_clock.h"
#include "net/transport.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lepus {

struct Http1Options {
    uint64_t keepalive_timeout_ms = 75000; // idle between requests
    uint64_t header_timeout_ms = 10000;    // from the first byte (or accept) to the end of the head
    uint64_t body_timeout_ms = 60000;      // silence while a body is read
    uint64_t send_timeout_ms = 60000;      // no progress while the client should read
    uint64_t linger_ms = 2000;             // draining unread input before the close
    uint64_t max_body_size = 1 << 20;      // else 413
    uint64_t keepalive_requests = 1000;    // then the connection closes
    // A body that streams to a backend (Exchange::body_holds_backend) must
    // arrive at this many bytes a second over each body timeout interval
    // (MinRate); 0: only the body timeout's silence applies.
    uint64_t min_body_rate = 240;
    // A connection whose first bytes are the HTTP/2 client preface is handed
    // to the HTTP/2 engine (Next::Http2): on TLS (ALPN h2) with http2, on
    // plain TCP (h2c with prior knowledge) with h2c. Off: the preface is an
    // HTTP/1.1 request like any other (505).
    bool http2 = true;
    bool h2c = true;
    // h2c: a file's DATA payloads go out with sendfile after their 9-byte
    // header, instead of pread into the output. Off by default: HTTP/2
    // frames are 16 KiB, and a header send plus a sendfile per frame came
    // out at 0.6x the pread path's throughput on 1 MiB files (BENCHMARKS).
    bool h2c_sendfile = false;
    ParserLimits limits;
};

// Connections reading a request and writing a response, and those that a
// 101 turned into a tunnel (WebSocket through the proxy), for the status page.
// Written by one reactor thread (load + store), read by any.
struct PhaseGauges {
    std::atomic<uint64_t> reading{0}, writing{0}, tunnels{0};
};

// What the engine keeps only while a request is in flight; idle keepalive
// connections hold none, which keeps them a few hundred bytes. Pooled.
struct Http1RequestState {
    explicit Http1RequestState(const Http1Options& options)
        : parser(options.limits), chunked(options.max_body_size) {}

    RequestParser parser;
    std::string input; // bytes received; [input_begin, input_end) not yet consumed
    size_t input_begin = 0;
    size_t input_end = 0;
    ChunkedDecoder chunked; // built with max_body_size: a large chunk is refused early
    std::string body;       // decoded chunked bytes the stream has not taken yet
    Exchange exchange;
    // A streamed response as it goes out: head, then framed body bytes;
    // [out_sent, size) not yet written.
    std::string out;
    size_t out_sent = 0;
};

// The per-loop pool of request states: the keepalive path allocates nothing.
class Http1StatePool {
public:
    explicit Http1StatePool(const Http1Options& options) : options_(options) {}
    std::unique_ptr<Http1RequestState> acquire();
    // `clean`: the parser, the response and the stream are already reset
    // (an idle connection's state), which spares resetting them again.
    void release(std::unique_ptr<Http1RequestState> state, bool clean = false);

private:
    const Http1Options& options_;
    std::vector<std::unique_ptr<Http1RequestState>> free_;
};

// What an engine shares with the other engines of its loop.
struct Http1Context {
    ExchangeHandler& handler;
    Http1StatePool& states;
    const LoopClock& clock;
    const Http1Options& options;
    PhaseGauges* gauges = nullptr;
};

class Http1Engine {
public:
    enum class Next : uint8_t {
        Wait,  // wait for an edge, a stream's progress or deadline()
        Yield, // the pass budget is spent: run again after the other connections
        Close, // close the connection (call close() first)
        Http2, // the client spoke HTTP/2: hand pending_input() to an Http2Engine, close() this one
    };

    static constexpr int kMaxRequestsPerPass = 16;
    static constexpr uint64_t kMaxBytesPerPass = 2u << 20; // as nginx's sendfile_max_chunk
    // Cached bodies from this size on go by sendfile where the transport can.
    static constexpr size_t kSendfileFrom = size_t{16} * 1024;
    // Streamed response bytes queued for the client before the stream is left waiting.
    static constexpr size_t kStreamOutHighWater = size_t{64} * 1024;

    // `info` and `listener` belong to the owner and outlive the engine. The
    // header deadline runs from now: a connection that sends nothing is closed
    // at the header timeout, as nginx's client_header_timeout.
    Http1Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                ExchangeListener& listener);
    ~Http1Engine();
    Http1Engine(const Http1Engine&) = delete;
    Http1Engine& operator=(const Http1Engine&) = delete;

    // Readiness reported by the poller.
    void on_readable() { readable_ = true; }
    void on_peer_shutdown() { readable_ = peer_shut_ = true; } // EPOLLRDHUP: read until 0
    // Resumed after a Yield: a new pass budget.
    void on_resume() { readable_ = true; }
    // Whether an EPOLLOUT edge alone is worth a drive(): output is waiting,
    // or the transport's own exchange (a TLS handshake) is.
    bool waits_for_write() const { return write_blocked_ || transport_.wants_write(); }

    // Runs the connection until it must wait.
    Next drive();
    // The deadline (loop milliseconds) to wake up at, 0 for none; exact() says
    // whether it must be hit exactly (a total deadline) or may be refreshed
    // lazily (an inactivity timeout).
    uint64_t deadline() const { return deadline_; }
    bool deadline_exact() const { return deadline_exact_; }
    // The timer fired: Close when the deadline has really passed (the owner's
    // timer may fire a little early), else Wait with deadline() unchanged.
    Next on_deadline();
    // The server is stopping: true when the connection is idle and may close
    // now; otherwise the response in progress is the last.
    bool on_shutdown();
    // Tears down: an exchange in flight is finished (logged as the client's
    // leaving), the request state goes back to the pool. Idempotent.
    void close();

    uint64_t requests() const { return requests_; }
    // After Next::Http2: the bytes read and not parsed (the preface onwards).
    std::string_view pending_input() const;

private:
    // Tunnel: after a stream's 101 (StreamHead::upgrade), bytes both ways
    // until either side closes (http1_stream.cc, tunnel()).
    enum class Phase : uint8_t {
        Idle,
        ReadingHead,
        ReadingBody,
        Writing,
        Streaming,
        Lingering,
        Tunnel
    };
    enum class Step : uint8_t { Continue, Wait, Yield, Close, Http2 };
    enum class BodyProgress : uint8_t { Done, NeedInput, StreamFull, Malformed };

    // How a streamed response goes out (http1_stream.cc).
    struct StreamOutput {
        int status = 0;
        bool head_built = false;
        bool has_length = false; // Content-Length: `left` bytes still expected
        bool chunked = false;    // framed as chunks (HTTP/1.1 without a length)
        bool no_body = false;    // HEAD, 204, 304: body bytes are dropped
        bool finished = false;   // every byte for the client is in the out buffer
        uint64_t left = 0;
        uint64_t head_size = 0;
        uint64_t bytes_sent = 0; // head and body, as written
        uint64_t body_bytes_sent() const {
            return bytes_sent > head_size ? bytes_sent - head_size : 0;
        }
    };

    void set_phase(Phase next);
    Step run_phase();
    void plan_deadline();
    // Reading.
    Step fill_input();
    void compact_input();
    Step read_head();
    // The first bytes of a connection against the HTTP/2 preface: Http2 when
    // they are it, Wait while they may still become it, Continue otherwise.
    Step detect_http2();
    Step on_head_parsed();
    Step read_body();
    BodyProgress consume_body();
    Step send_continue();
    // Answering.
    Step dispatch();
    Step respond_error(int status);
    Step fail_exchange(int status, const ResponseHead* extra = nullptr);
    Step redirect_exchange();
    // Lets go of the answer in the making (the stream), before another.
    void drop_answer();
    Step write_response();
    Step write_stalled(ssize_t result);
    Step start_writing();
    void account(int status, uint64_t body_bytes);
    void end_exchange();
    Step finish_response(int status, uint64_t body_bytes);
    Step linger();
    // Whether the connection ends with the response in progress (its FIN,
    // or the shutdown of a lingering close, follows it at once).
    bool closes_after_response() const { return !keep_alive_ || peer_closed_ || !body_done_; }
    // Streaming (http1_stream.cc).
    Step start_stream();
    Step stream();
    Step stream_failed(StreamState state);
    Step relay_stream();
    bool build_stream_head();
    void build_tunnel_head();
    Step tunnel();
    bool frame_stream_body();
    Step write_out();

    const Http1Context& context_;
    Transport& transport_;
    ConnectionInfo& info_;
    ExchangeListener& listener_;
    std::unique_ptr<Http1RequestState> state_;
    Phase phase_ = Phase::Idle;
    uint64_t deadline_ = 0;
    bool deadline_exact_ = true;
    uint64_t requests_ = 0;
    size_t head_size_ = 0;   // of the request in flight, in the input buffer
    uint64_t body_left_ = 0; // Content-Length bytes not yet read
    size_t head_sent_ = 0;   // of a complete response
    uint64_t body_sent_ = 0; // memory and file bytes
    uint64_t bytes_this_pass_ = 0;
    int requests_this_pass_ = 0;
    size_t continue_sent_ = 0; // bytes of "100 Continue" written
    StreamOutput out_;
    // Input.
    bool readable_ = true;   // data may be waiting (no EAGAIN since the last edge)
    bool peer_shut_ = false; // EPOLLRDHUP seen: keep reading until 0
    bool peer_closed_ = false;
    // The request.
    bool body_chunked_ = false;
    bool body_done_ = true;        // the request body is read (or there is none)
    bool body_blocked_ = false;    // the stream took no more body: wait for it, not the client
    bool continue_wanted_ = false; // Expect: 100-continue, not sent yet
    bool in_exchange_ = false;     // start() or fail() ran, finish() not yet
    bool accounted_ = false;       // account() ran for the exchange in flight
    // The engine waits for a body that holds a backend connection
    // (Exchange::body_holds_backend): the rate it must keep up, over
    // intervals of the body timeout.
    MinRate body_rate_;
    // The connection.
    bool write_blocked_ = false;  // the transport said EAGAIN to output
    bool keep_alive_ = true;      // for the response in progress
    bool error_response_ = false; // the parser's own error: close after it
    bool draining_ = false;       // the server is stopping
    bool closed_ = false;
};

} // namespace lepus
