// Http2Engine: HTTP/2 (RFC 9113) on one connection, between a Transport and
// the same ExchangeHandler as the HTTP/1.1 engine: each stream is one
// Exchange, answered by the same router and handlers, which never know.
//
// nghttp2 does the framing, HPACK, flow control and the protocol's checks on
// memory only (nghttp2_session_mem_recv / mem_send); lepus keeps its own I/O:
// the engine reads the transport into nghttp2 and writes what nghttp2 produces.
// The HTTP/1.1 engine hands a connection over when its first bytes are the
// client preface: on a TLS listener after ALPN chose "h2", on a plain one as
// h2c with prior knowledge (RFC 9113 §3.3; no Upgrade: h2c, §3.1 dropped it).
//
// Responses: a complete Response (a head written as HTTP/1.1 text by the
// handlers, a memory body and/or a file range) is turned into HEADERS (the
// head's fields, lowercased, hop-by-hop ones dropped) and DATA read from
// memory or from the file (sendfile on plain TCP, pread into the output on
// TLS: see Transport::zero_copy_files and Http2Output); a ResponseStream
// (FastCGI) is relayed as it arrives, its back-pressure mapped onto HTTP/2
// flow control both ways: request body bytes are acknowledged (WINDOW_UPDATE)
// only once the backend has taken them, and response bytes are taken from the
// backend only as the client's window lets DATA out, so a slow reader of one
// stream stalls only that stream.
//
// Priority: RFC 9218's `priority` header field (urgency, incremental), as
// nghttp2 schedules DATA once SETTINGS_NO_RFC7540_PRIORITIES is sent.
//
// Limits: SETTINGS_MAX_CONCURRENT_STREAMS 100, a bounded header list per
// stream (431, and past twice the bound the stream is reset and the rest of
// its block no longer checked), a bound on streams reset by either side or
// refused (rapid reset CVE-2023-44487, MadeYouReset CVE-2025-8671: GOAWAY
// ENHANCE_YOUR_CALM), nghttp2's guards against CONTINUATION floods
// (CVE-2024-27316), SETTINGS and PING floods (outbound ACK queue bound). Timeouts: the preface and
// first request under the header deadline, an idle connection under the keepalive timeout, stalled
// output under a minimum send rate (each send timeout interval it waits must see 256 bytes a second
// leave, or it closes). A stopping server sends GOAWAY and lets the streams in flight finish.
// Memory: an idle connection keeps no output buffer, and after a second idle gives its nghttp2
// frame buffer's pages back (detail/http2_memory.h).
#pragma once

#include "http/http1_engine.h"
#include "http/http2_output.h"
#include "http/min_rate.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

struct nghttp2_session;

namespace lepus {

struct Http2Stream;
namespace detail {
class Http2Memory;
}

// Connections and streams on HTTP/2, for the status page.
struct Http2Gauges {
    std::atomic<uint64_t> connections{0}, streams{0}, streams_total{0}, connections_total{0};
    // Bytes held by answered streams of the reactor's connections (their
    // Http2Engine::held_bytes_).
    std::atomic<uint64_t> held_bytes{0};
};

class Http2Engine {
public:
    using Next = Http1Engine::Next;

    static constexpr uint32_t kMaxConcurrentStreams = 100;
    // The header list a stream may send (name + value + 32 per field, as
    // SETTINGS_MAX_HEADER_LIST_SIZE counts): beyond it, 431.
    static constexpr uint32_t kMaxHeaderList = 64 * 1024;
    // Past this many bytes of one header list, decoded (HPACK lets a one-byte
    // reference stand for a 4 KB field), the stream is reset and nghttp2 only
    // keeps the HPACK table in step for the rest of the block: no more field
    // checks, no more callbacks (answering 431 would mean checking it all).
    static constexpr uint32_t kMaxHeaderListDecoded = 2 * kMaxHeaderList;
    // Streams reset by either side or refused, per connection, in a window
    // of kResetWindowMs (RFC 9113 §10.5: an endpoint may treat activity that
    // makes it do work for nothing as ENHANCE_YOUR_CALM). Past
    // kResetsTolerated resets when they are at least half of the streams
    // opened in the window, or past kResetsMax whatever the ratio: GOAWAY
    // ENHANCE_YOUR_CALM. A browser leaving a page cancels at most its 100
    // concurrent streams; a rapid reset or MadeYouReset attack resets nearly
    // every stream it opens, thousands a second. nghttp2 1.52 counts only the
    // client's RST_STREAM (1000 at once, then 33 a second, by a GOAWAY that
    // lets what was read run first); newer nghttp2 counts "glitches" too.
    static constexpr uint64_t kResetWindowMs = 10'000;
    static constexpr uint32_t kResetsTolerated = 200;
    static constexpr uint32_t kResetsMax = 1000;
    // Client streams (the last this many ids) whose closing lepus remembers:
    // frames on one it reset or refused are ignored (§5.1, §6.4), frames on
    // one closed otherwise are a STREAM_CLOSED error. Older ones: ignored.
    static constexpr size_t kRememberedStreams = 1024;
    // Memory held by streams that cannot send (issue 32: 20 connections of
    // 100 streams, each with a 60 KiB request head and a zero window, held
    // 120 MB): streams keep their request head, response head and generated
    // body until their last DATA leaves, and a client that never opens its
    // window keeps them until the minimum send rate closes it. A new stream
    // is refused (REFUSED_STREAM, which a client may retry: RFC 9113 §8.7)
    // while the connection's streams that wait for the client's window (or
    // for a socket it does not read) hold more than kMaxBlockedBytes, or
    // more than kBlockedShare when the reactor's answered streams hold more
    // than kMaxHeldPerReactor in all. A backend's buffered response counts
    // too (it is bounded per stream by the backend's own high water mark).
    static constexpr uint64_t kMaxBlockedBytes = uint64_t{1} << 20;
    static constexpr uint64_t kBlockedShare = uint64_t{128} * 1024;
    static constexpr uint64_t kMaxHeldPerReactor = uint64_t{32} << 20;
    // Bytes read from the transport per pass before other connections run.
    static constexpr size_t kMaxReadPerPass = size_t{256} * 1024;

    // `received`: what the HTTP/1.1 engine read already (the preface onwards).
    Http2Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                ExchangeListener& listener, std::string_view received,
                Http2Gauges* gauges = nullptr);
    ~Http2Engine();
    Http2Engine(const Http2Engine&) = delete;
    Http2Engine& operator=(const Http2Engine&) = delete;

    void on_readable() { readable_ = true; }
    void on_peer_shutdown() {
        readable_ = true;
        peer_shut_ = true; // read on to the end of stream, short reads or not
    }
    void on_resume() { readable_ = true; }
    bool waits_for_write() const { return write_blocked_ || transport_.wants_write(); }

    Next drive();
    uint64_t deadline() const { return deadline_; }
    bool deadline_exact() const { return false; }
    Next on_deadline();
    bool on_shutdown();
    void close();

private:
    friend struct Http2Callbacks;

    // Reading: the transport into nghttp2; false: the connection is over.
    bool read_input();
    // An orderly close: shutdown_write, then linger() until the client's FIN
    // or linger_ms.
    Next start_lingering();
    // Reads and drops what the client sends while lingering.
    Next linger();
    // nghttp2_session_mem_recv over runs of frames (see the .cc); false: over.
    bool feed(const char* data, size_t size);
    // Writing: nghttp2's frames out; false on a transport error or a file
    // that ended under its frames (then for good: on_shutdown and on_deadline
    // write too, and the close comes at the next drive).
    bool write_output();
    // Streams whose backend made progress: heads, body bytes, failures.
    void poll_streams();
    // A request head is complete: route it.
    void start_exchange(Http2Stream& stream);
    // The answer to `stream` is decided (complete or a stream's head): HEADERS.
    void submit_response(Http2Stream& stream);
    void submit_stream_head(Http2Stream& stream);
    // The router must answer `status` itself (a stream failed, 413, 431).
    void fail_exchange(Http2Stream& stream, int status, const ResponseHead* extra = nullptr);
    // A stream that reported Failed: its status and fields.
    void fail_failed_stream(Http2Stream& stream);
    void redirect_exchange(Http2Stream& stream);
    // Lets go of the stream's answer in the making, before another.
    void drop_answer(Http2Stream& stream);
    // Sends the answer the handler gave again: relays a stream, or submits a response.
    void answer_again(Http2Stream& stream);
    // Offers the held request body (and its end) to the stream's answer;
    // whether it took anything, after which it must be polled to send it.
    bool offer_body(Http2Stream& stream);
    void finish_stream(Http2Stream& stream);
    // The stream's answer is submitted: what it holds counts until it closes.
    void hold(Http2Stream& stream);
    // Whether a new stream is refused for the memory held by streams that
    // cannot send (kMaxBlockedBytes); blocked_bytes() counts those.
    bool refuses_new_stream() const;
    uint64_t blocked_bytes() const;
    void plan_deadline();
    // The earliest body deadline of the streams waiting for their client's
    // body (0: none); reset_idle_bodies() resets those past it (408).
    // Streams that hold a backend connection start their body rate interval
    // here when their wait begins.
    uint64_t body_deadline();
    bool reset_idle_bodies();
    // RST_STREAM from us (on_frame_send remembers the id).
    void reset_stream(int32_t id, uint32_t error_code);
    // A client's HEADERS with a new stream id: the ids skipped are closed
    // (§5.1.1); the new one counts as refused until nghttp2 opens it.
    void stream_id_used(int32_t id);
    void stream_opened(int32_t id);
    // A RST_STREAM of ours left (a reset or a refusal): frames that cross it
    // are ignored.
    void reset_sent(int32_t id);
    // Whether frames on client stream `id`, closed, are ignored (see
    // kRememberedStreams) rather than a connection error.
    bool ignores_frames_on(int32_t id) const;
    // A stream reset, by either side: past the limits, GOAWAY ENHANCE_YOUR_CALM.
    void count_reset();
    void roll_reset_window();
    // GOAWAY with `error_code`; nothing more is read: the GOAWAY leaves before
    // more input is fed (nghttp2 would ignore it anyway).
    void terminate(uint32_t error_code);
    void check_priority();

    const Http1Context& context_;
    Transport& transport_;
    ConnectionInfo& info_;
    ExchangeListener& listener_;
    Http2Gauges* gauges_;
    // nghttp2's allocator, whose frame buffer an idle connection gives back
    // (detail/http2_memory.h); it outlives session_, which close() deletes.
    std::unique_ptr<detail::Http2Memory> memory_;
    nghttp2_session* session_ = nullptr;
    std::map<int32_t, std::unique_ptr<Http2Stream>> streams_;
    Http2Stream* last_found_ = nullptr; // of streams_, by Http2Callbacks::find
    std::string input_;                 // bytes handed over by the HTTP/1.1 engine, fed first
    Http2Output output_;                // frames produced, not yet written
    uint64_t deadline_ = 0;
    uint64_t last_activity_ms_ = 0;
    // Output that waits must move kMinSendBytesPerSecond on average over each
    // --send-timeout interval, or the connection closes at the interval's end.
    static constexpr uint64_t kMinSendBytesPerSecond = 256;
    MinRate send_rate_;
    uint64_t requests_ = 0;
    uint64_t held_bytes_ = 0;       // by answered streams (Http2Stream::held)
    int32_t highest_stream_id_ = 0; // of the client's HEADERS so far
    // Bit (id >> 1) % kRememberedStreams: frames on that closed stream are ignored.
    std::array<uint64_t, kRememberedStreams / 64> ignored_streams_{};
    uint64_t reset_window_ms_ = 0; // when the current window began
    uint32_t resets_ = 0;          // streams reset in the window
    uint32_t streams_opened_ = 0;  // new stream ids in the window
    bool stop_reading_ = false;    // a GOAWAY that ends the connection is queued
    // refuses_new_stream() said yes once: logged then, not for every stream.
    bool refused_for_memory_ = false;
    // Where feed() is in the client's byte stream.
    size_t preface_left_ = 24; // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    uint64_t frame_left_ = 0;  // payload bytes of the current frame
    std::array<char, 9> frame_header_{};
    size_t header_have_ = 0;
    // A PRIORITY frame's payload, for the self-dependency check.
    std::array<char, 5> priority_{};
    size_t priority_have_ = 0;
    int32_t priority_stream_ = 0; // 0: not in a PRIORITY frame
    // An idle connection gives its nghttp2 frame buffer's pages back after
    // this long without input or output (see on_deadline); trimmed_: done
    // since the last activity.
    static constexpr uint64_t kTrimAfterIdleMs = 1000;
    bool trimmed_ = false;
    bool readable_ = true;
    bool write_blocked_ = false;
    bool stalled_ = false; // output waited at the last plan_deadline()
    bool peer_closed_ = false;
    bool peer_shut_ = false; // the poller saw the client's FIN (EPOLLRDHUP)
    bool draining_ = false;
    bool lingering_ = false; // our side is shut down: only draining the client's
    bool closed_ = false;
    bool output_broken_ = false; // a DATA frame was cut short: nothing more may follow
};

} // namespace lepus
