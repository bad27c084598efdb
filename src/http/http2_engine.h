// Http2Engine: HTTP/2 (RFC 9113) on one connection, between a Transport and
// the same ExchangeHandler as the HTTP/1.1 engine: each stream is one
// Exchange, answered by the same router and handlers, which never know.
//
// lepus's own HTTP/2 code does the framing (http2_frames.h), HPACK (hpack.h),
// the stream states (§5.1) and flow control (§5.2, §6.9) on memory only;
// lepus keeps its own I/O: the engine reads the transport into its frame
// decoder and writes what it produced. Files: http2_engine.cc (reading,
// writing, the exchange side), http2_receive.cc (frames received: streams,
// settings, windows, the limits), http2_send.cc (HEADERS and DATA out,
// scheduled), http2_deadline.cc (timeouts), http2_stream.cc (a request's
// fields, checked as §8.2 and §8.3 ask).
// The HTTP/1.1 engine hands a connection over when its first bytes are the
// client preface: on a TLS listener after ALPN chose "h2", on a plain one as
// h2c with prior knowledge (RFC 9113 §3.3; no Upgrade: h2c, §3.1 dropped it).
//
// Responses: a complete Response (a head written as HTTP/1.1 text by the
// handlers, a memory body and/or a file range) is turned into HEADERS (the
// head's fields, lowercased, hop-by-hop ones dropped; a head whose fields
// repeat one encoded under the same HPACK table is copied as bytes, see
// http2_send.cc) and DATA read from
// memory or from the file (sendfile on plain TCP, pread into the output on
// TLS: see Transport::zero_copy_files and Http2Output); a ResponseStream
// (FastCGI) is relayed as it arrives, its back-pressure mapped onto HTTP/2
// flow control both ways: request body bytes are acknowledged (WINDOW_UPDATE)
// only once the backend has taken them, and response bytes are taken from the
// backend only as the client's window lets DATA out, so a slow reader of one
// stream stalls only that stream.
//
// Priority: RFC 9218's `priority` header field (urgency, incremental), with
// SETTINGS_NO_RFC7540_PRIORITIES sent: DATA goes to the most urgent streams
// first; among streams of one urgency a non-incremental one is sent to its
// end (or its window) before the next, incremental ones take turns a frame
// at a time.
//
// Limits: SETTINGS_MAX_CONCURRENT_STREAMS 100, a bounded header list per
// stream (431, and past twice the bound the stream is reset and the rest of
// its block no longer checked), a bound on streams reset by either side or
// refused (rapid reset CVE-2023-44487, MadeYouReset CVE-2025-8671: GOAWAY
// ENHANCE_YOUR_CALM), a header block in at most 8 CONTINUATION frames and
// 144 KiB (CVE-2024-27316, Http2FrameDecoder), SETTINGS and PING floods (at
// most kMaxQueuedAcks ACKs owed to a client that does not read, 32 values a
// SETTINGS frame), empty DATA frames counted (kMaxEmptyFrames in a window). Timeouts: the preface
// and first request under the header deadline, an idle connection under the keepalive timeout,
// stalled output under a minimum send rate (each send timeout interval it waits must see 256 bytes
// a second leave, or it closes). A stopping server sends GOAWAY and lets the streams in flight
// finish. Memory: an idle connection keeps no output buffer and no gathering buffer; its HPACK
// tables grow with what they hold (the decoded header list is one per thread).
#pragma once

#include "http/hpack.h"
#include "http/http1_engine.h"
#include "http/http2_frames.h"
#include "http/http2_output.h"
#include "http/min_rate.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

struct Http2Stream;

// Connections and streams on HTTP/2, for the status page.
struct Http2Gauges {
    std::atomic<uint64_t> connections{0}, streams{0}, streams_total{0}, connections_total{0};
    // Bytes held by answered streams of the reactor's connections (their
    // Http2Engine::held_bytes_).
    std::atomic<uint64_t> held_bytes{0};
};

class Http2Engine : private Http2FrameVisitor {
public:
    using Next = Http1Engine::Next;

    static constexpr uint32_t kMaxConcurrentStreams = 100;
    // The header list a stream may send (name + value + 32 per field, as
    // SETTINGS_MAX_HEADER_LIST_SIZE counts): beyond it, 431.
    static constexpr uint32_t kMaxHeaderList = 64 * 1024;
    // Past this many bytes of one header list, decoded (HPACK lets a one-byte
    // reference stand for a 4 KB field), the stream is reset (INTERNAL_ERROR)
    // and the decoder only keeps the HPACK table in step for the rest of the
    // block: no more fields kept (answering 431 would mean keeping it all).
    static constexpr uint32_t kMaxHeaderListDecoded = 2 * kMaxHeaderList;
    // Streams reset by either side or refused, per connection, in a window
    // of kResetWindowMs (RFC 9113 §10.5: an endpoint may treat activity that
    // makes it do work for nothing as ENHANCE_YOUR_CALM). Past
    // kResetsTolerated resets when they are at least half of the streams
    // opened in the window, or past kResetsMax whatever the ratio: GOAWAY
    // ENHANCE_YOUR_CALM. A browser leaving a page cancels at most its 100
    // concurrent streams; a rapid reset or MadeYouReset attack resets nearly
    // every stream it opens, thousands a second.
    static constexpr uint64_t kResetWindowMs = 10'000;
    static constexpr uint32_t kResetsTolerated = 200;
    static constexpr uint32_t kResetsMax = 1000;
    // Frames that carry nothing and end nothing (empty DATA without
    // END_STREAM), in the same window: past this many, ENHANCE_YOUR_CALM
    // (each costs a wakeup and a pass over the frame for no progress).
    static constexpr uint32_t kMaxEmptyFrames = 1000;
    // ACKs (SETTINGS, PING) owed to a client while its output waits: past
    // this many it is flooding a socket it does not read, ENHANCE_YOUR_CALM.
    static constexpr uint32_t kMaxQueuedAcks = 1000;
    // Values in one SETTINGS frame (a client has 7 to send).
    static constexpr uint32_t kMaxSettingsValues = 32;
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
    // Frames produced per batch before they are written (file payloads counted).
    static constexpr uint64_t kBatchBytes = uint64_t{64} * 1024;
    // Bytes read from the transport per pass before other connections run.
    static constexpr size_t kMaxReadPerPass = size_t{256} * 1024;
    // Our windows (SETTINGS_INITIAL_WINDOW_SIZE, and the connection's):
    // room for several streams' bodies at once.
    static constexpr uint32_t kStreamWindow = 256 * 1024;
    static constexpr uint32_t kConnectionWindow = 1 << 20;

    // `received`: what the HTTP/1.1 engine read already (the preface onwards).
    Http2Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                ExchangeListener& listener, std::string_view received,
                Http2Gauges* gauges = nullptr);
    ~Http2Engine() override;
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
    // Reading: the transport into the frame decoder; false: the connection is over.
    bool read_input();
    // An orderly close: shutdown_write, then linger() until the client's FIN
    // or linger_ms.
    Next start_lingering();
    // Reads and drops what the client sends while lingering.
    Next linger();
    // Writing: frames out (produce() fills the output); false on a transport
    // error or a file that ended under its frames (then for good: on_shutdown
    // and on_deadline write too, and the close comes at the next drive).
    bool write_output();
    // Streams whose backend made progress: heads, body bytes, failures.
    void poll_streams();
    // A request head is complete: route it.
    void start_exchange(Http2Stream& stream);
    // The answer to `stream` is decided (complete or a stream's head): its
    // HEADERS go out at the next produce().
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

    // http2_receive.cc: the frames the decoder reports (Http2FrameVisitor).
    bool on_data_begin(const Http2FrameHeader& header) override;
    bool on_data(const Http2FrameHeader& header, std::string_view piece) override;
    bool on_data_end(const Http2FrameHeader& header) override;
    bool on_headers(const Http2FrameHeader& first, uint32_t depends_on,
                    std::string_view block) override;
    bool on_priority(uint32_t stream_id, uint32_t depends_on) override;
    bool on_rst_stream(uint32_t stream_id, uint32_t error_code) override;
    bool on_setting(uint16_t id, uint32_t value) override;
    bool on_settings_end(bool ack) override;
    bool on_ping(bool ack, std::string_view opaque_data) override;
    bool on_goaway(uint32_t last_stream_id, uint32_t error_code) override;
    bool on_window_update(uint32_t stream_id, uint32_t increment) override;
    void on_connection_error(Http2Error error, const char* why) override;
    // A new stream's header block (HEADERS on an unused id).
    bool open_stream(const Http2FrameHeader& first, uint32_t depends_on, std::string_view block);
    // Trailers on an open stream: checked, then the end of its body.
    bool stream_trailers(Http2Stream& stream, const Http2FrameHeader& first,
                         std::string_view block);
    // Decodes `block` to keep the HPACK table in step; false: COMPRESSION_ERROR sent.
    bool decode_block(std::string_view block, Http2Stream* stream);
    // Frames on a closed stream `id`: ignored, or a connection error (§5.1).
    bool frame_on_closed_stream(uint32_t id, bool headers);
    // Request body bytes taken (by the backend, or dropped): the windows
    // reopen by WINDOW_UPDATE once half of them is used (§6.9).
    void consume(Http2Stream* stream, size_t bytes);
    Http2Stream* find(uint32_t id);
    // Streams open, not counting the closed ones sweep_streams() has yet to remove.
    size_t open_streams() const { return streams_.size() - closed_streams_; }
    // Removes the closed streams (both sides ended, or reset): their exchanges end.
    void sweep_streams();
    // Marks `stream` closed (removed at the next sweep).
    void close_stream(Http2Stream& stream);
    // RST_STREAM from us; the stream closes now. NO_ERROR (a response that
    // ended before its request) counts as no reset.
    void reset_stream(uint32_t id, Http2Error error);
    // A client's HEADERS with a new stream id: the ids skipped are closed
    // (§5.1.1); the new one counts as refused until it is opened.
    void stream_id_used(uint32_t id);
    void stream_opened(uint32_t id);
    // A RST_STREAM of ours (a reset or a refusal): frames that cross it are ignored.
    void reset_sent(uint32_t id);
    // Sets the bit of client stream `id` (frames on it are ignored).
    void ignore_frames_on(uint32_t id);
    // Whether frames on client stream `id`, closed, are ignored (see
    // kRememberedStreams) rather than a connection error.
    bool ignores_frames_on(uint32_t id) const;
    // A stream reset, by either side: past the limits, GOAWAY ENHANCE_YOUR_CALM.
    void count_reset();
    // An ACK queued; false when the client owes too many (terminate() ran).
    bool count_ack();
    void roll_reset_window();
    // GOAWAY with `error`; nothing more is read: the GOAWAY leaves before
    // more input is decoded.
    void terminate(Http2Error error);

    // http2_send.cc: HEADERS and DATA of the streams' answers into the
    // output, up to a batch, within the client's windows.
    void produce();
    void send_head(Http2Stream& stream);
    // Server and the head's own fields into `block` (HPACK).
    void encode_head_fields(Http2Stream& stream, std::string& block);
    // One DATA frame of `stream` (false: nothing could go now).
    bool send_data(Http2Stream& stream);
    void send_memory_data(std::string_view header, const Response& response,
                          std::string_view payload);
    int send_file_data(std::string_view header, const Response& response, uint64_t file_at,
                       size_t length);
    // The stream sent END_STREAM: it closes once the client ended too.
    void sent_end_stream(Http2Stream& stream);
    // Whether `stream` has DATA it could send, windows aside.
    static bool has_data(const Http2Stream& stream);
    bool window_open(const Http2Stream& stream) const;

    Http2Output& output() {
        if (!output_) output_ = std::make_unique<Http2Output>();
        return *output_;
    }
    bool output_empty() const { return !output_ || output_->empty(); }
    uint64_t output_pending() const { return output_ ? output_->pending() : 0; }

    const Http1Context& context_;
    Transport& transport_;
    ConnectionInfo& info_;
    ExchangeListener& listener_;
    Http2Gauges* gauges_;
    Http2FrameDecoder decoder_;
    HpackDecoder hpack_decoder_;
    HpackEncoder hpack_encoder_;
    // Open streams (at most kMaxConcurrentStreams and a few that await the
    // client's end), in the order they opened.
    std::vector<std::unique_ptr<Http2Stream>> streams_;
    Http2Stream* last_found_ = nullptr; // of streams_, by find()
    // Bytes handed over by the HTTP/1.1 engine, decoded first, then freed (a
    // pointer: 24 bytes less than a string in every idle engine, issue 38).
    std::unique_ptr<std::string> input_;
    // Frames produced, not yet written: allocated while there are some and
    // freed when the connection goes idle (88 bytes less in every idle engine,
    // which then fits tcmalloc's 512-byte class, issue 38).
    std::unique_ptr<Http2Output> output_;
    uint64_t deadline_ = 0;
    uint64_t last_activity_ms_ = 0;
    // Output that waits must move kMinSendBytesPerSecond on average over each
    // --send-timeout interval, or the connection closes at the interval's end.
    static constexpr uint64_t kMinSendBytesPerSecond = 256;
    // Allocated when output first waits (plan_deadline), freed when the
    // connection goes idle (write_output): 24 bytes less in an idle engine.
    // Allocated whenever stalled_ is set.
    std::unique_ptr<MinRate> send_rate_;
    uint64_t requests_ = 0;
    uint64_t held_bytes_ = 0;        // by answered streams (Http2Stream::held)
    uint32_t highest_stream_id_ = 0; // of the client's HEADERS so far
    // Beside highest_stream_id_ so that no padding is left between the
    // 32-bit fields (the engine fits tcmalloc's 640-byte class, issue 38).
    uint32_t closed_streams_ = 0; // in streams_, not yet swept
    // Bit (id >> 1) % kRememberedStreams: frames on that closed stream are
    // ignored. Allocated with the first stream that is reset or never
    // opens: until then every bit is clear, and the newest id's refusal
    // until it opens is newest_refused_ (an idle connection is 128 bytes
    // smaller, issue 38).
    std::unique_ptr<std::array<uint64_t, kRememberedStreams / 64>> ignored_streams_;
    uint64_t reset_window_ms_ = 0; // when the current window began
    uint32_t resets_ = 0;          // streams reset in the window
    uint32_t streams_opened_ = 0;  // new stream ids in the window
    uint32_t empty_frames_ = 0;    // in the window
    uint32_t queued_acks_ = 0;     // since the output was last empty
    uint32_t settings_values_ = 0; // in the SETTINGS frame being read
    uint32_t frame_data_ = 0;      // data bytes of the DATA frame being read (padding aside)
    // Flow control (§6.9): what we may send (the client's windows), and what
    // the client may still send us and has sent that we have not yet given back.
    int64_t send_window_ = kHttp2DefaultWindow;
    uint32_t peer_initial_window_ = kHttp2DefaultWindow;
    uint32_t peer_max_frame_size_ = kHttp2DefaultMaxFrameSize;
    int64_t receive_window_ = kConnectionWindow;
    uint32_t receive_unacked_ = 0;
    Http2Error goaway_error_ = Http2Error::NoError;
    // One bit each: the engine's tail fits 16 bytes instead of 24 (with
    // send_rate_ by pointer, the engine fits tcmalloc's 448-byte class, issue 38).
    bool goaway_sent_ : 1 = false;
    bool stop_reading_ : 1 = false; // a GOAWAY that ends the connection is queued
    // refuses_new_stream() said yes once: logged then, not for every stream.
    bool refused_for_memory_ : 1 = false;
    bool readable_ : 1 = true;
    bool write_blocked_ : 1 = false;
    bool stalled_ : 1 = false; // output waited at the last plan_deadline()
    bool peer_closed_ : 1 = false;
    bool peer_shut_ : 1 = false; // the poller saw the client's FIN (EPOLLRDHUP)
    bool draining_ : 1 = false;
    bool lingering_ : 1 = false; // our side is shut down: only draining the client's
    bool closed_ : 1 = false;
    bool output_broken_ : 1 = false;  // a DATA frame was cut short: nothing more may follow
    bool newest_refused_ : 1 = false; // highest_stream_id_ counts as refused until it opens
};

} // namespace lepus
