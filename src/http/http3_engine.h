// Http3Engine: HTTP/3 (RFC 9114) on one QUIC connection, between the
// connection's streams (net/quic_connection.h) and the same ExchangeHandler
// as the HTTP/1.1 and HTTP/2 engines: each request stream is one Exchange,
// answered by the same router, steps, handlers and filters, which never know.
//
// nghttp3 does the framing, QPACK and the protocol's checks; the request head
// is gathered into the same per-stream request model as HTTP/2's
// (detail/http2_stream.h: pseudo-headers, cookie joining, the Host rule) and
// the response head is made by the same code (detail/http2_head.h).
//
// Bodies and back-pressure: nghttp3 keeps pointers to the bytes it was given
// until QUIC acknowledges them, so a stream keeps what it sent in chunks it
// frees as acknowledgements come (memory bodies are lent, not copied). A
// stream that has kMaxUnacknowledged bytes in flight, or whose backend has
// nothing yet, stops (NGHTTP3_ERR_WOULDBLOCK) until an ACK or the backend's
// progress resumes it, so a slow client holds only its own window and a
// backend is read only as fast as the client takes its bytes. Request body
// bytes are given back to QUIC flow control only once the backend took them.
#pragma once

#include "http/exchange.h"
#include "http/http1_engine.h"
#include "net/quic_connection.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>

struct nghttp3_conn;

namespace lepus {

struct Http3Stream;

// HTTP/3 connections and streams, for the status page.
struct Http3Gauges {
    std::atomic<uint64_t> streams{0}, streams_total{0};
};

class Http3Engine final : public QuicApplication, public ExchangeListener {
public:
    // Bytes a stream may have sent and not yet had acknowledged.
    static constexpr uint64_t kMaxUnacknowledged = uint64_t{256} * 1024;
    static constexpr size_t kChunk = size_t{16} * 1024;

    Http3Engine(const Http1Context& context, QuicConnection& connection,
                Http3Gauges* gauges = nullptr);
    ~Http3Engine() override;

    // QuicApplication
    bool start() override;
    int64_t receive(int64_t id, const uint8_t* data, size_t size, bool fin) override;
    int acknowledged(int64_t id, uint64_t bytes) override;
    int stream_closed(int64_t id, uint64_t app_error) override;
    int stream_reset(int64_t id) override;
    int stream_unblocked(int64_t id) override;
    void client_streams(uint64_t max) override;
    int64_t next_data(int64_t& id, bool& fin, QuicVec* vec, size_t count) override;
    void stream_blocked(int64_t id) override;
    void stream_write_shut(int64_t id) override;
    int written(int64_t id, size_t bytes) override;
    void poll() override;
    void shutdown() override;
    bool idle() const override { return streams_.empty(); }
    // RFC 9114 §8.1: H3_NO_ERROR.
    uint64_t no_error_code() const override { return 0x100; }
    void close() override;

    // ExchangeListener: a backend made progress.
    void on_exchange_progress() override { connection_.drive(); }

private:
    friend struct Http3Callbacks;

    void start_exchange(Http3Stream& stream);
    // Offers the held request body (and its end) to the stream's answer;
    // whether it took anything, after which it must be polled to send it.
    bool offer_body(Http3Stream& stream);
    void submit_response(Http3Stream& stream);
    void submit_stream_head(Http3Stream& stream);
    void submit(Http3Stream& stream, bool with_body);
    void fail_exchange(Http3Stream& stream, int status, const ResponseHead* extra = nullptr);
    void drop_answer(Http3Stream& stream);
    void answer_again(Http3Stream& stream);
    void finish_stream(Http3Stream& stream);
    // nghttp3's read_data: the next body bytes of `stream`.
    int64_t read_body(Http3Stream& stream, QuicVec* vec, size_t count, uint32_t& flags);

    const Http1Context& context_;
    QuicConnection& connection_;
    Http3Gauges* gauges_;
    ConnectionInfo info_;
    nghttp3_conn* h3_ = nullptr;
    std::map<int64_t, std::unique_ptr<Http3Stream>> streams_;
    struct HeadFields;
    std::unique_ptr<HeadFields> head_fields_;
    bool closed_ = false;
};

} // namespace lepus
