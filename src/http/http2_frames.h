// HTTP/2 framing (RFC 9113 §4, §6): an incremental decoder of the client's
// byte stream, and writers that append the server's frames to an Http2Output.
//
// The decoder is fed whole reads; a frame may span them. It checks what §4
// and §6 say about each frame by itself (lengths against
// SETTINGS_MAX_FRAME_SIZE, stream 0 or not, padding, SETTINGS values, a
// header block interrupted, PUSH_PROMISE from a client) and reports the
// frames to an Http2FrameVisitor, which keeps the connection's state (streams,
// windows) and so makes the checks that need it. A DATA payload is handed on
// as views into the reads, in as many pieces as the reads cut it, never
// copied; another frame is handed on as a view when one read holds it whole,
// else gathered first. A header block (HEADERS and its CONTINUATIONs) is
// handed on whole, bounded in frames and bytes (CVE-2024-27316, the
// CONTINUATION flood). Unknown frame types are skipped (§4.1, §5.5).
// Needs no socket: test/http/http2_frames_test.cc splits input at every byte,
// test/fuzz/http2_frames_fuzz.cc feeds it anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace lepus {

class Http2Output;

enum class Http2FrameType : uint8_t {
    Data = 0,
    Headers = 1,
    Priority = 2,
    RstStream = 3,
    Settings = 4,
    PushPromise = 5,
    Ping = 6,
    Goaway = 7,
    WindowUpdate = 8,
    Continuation = 9,
};

// Frame flags (§6): END_STREAM and ACK share a bit on different frames.
namespace http2_flag {
constexpr uint8_t kEndStream = 0x1;
constexpr uint8_t kAck = 0x1;
constexpr uint8_t kEndHeaders = 0x4;
constexpr uint8_t kPadded = 0x8;
constexpr uint8_t kPriority = 0x20;
} // namespace http2_flag

// Error codes (§7).
enum class Http2Error : uint32_t {
    NoError = 0x0,
    ProtocolError = 0x1,
    InternalError = 0x2,
    FlowControlError = 0x3,
    SettingsTimeout = 0x4,
    StreamClosed = 0x5,
    FrameSizeError = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    CompressionError = 0x9,
    ConnectError = 0xa,
    EnhanceYourCalm = 0xb,
    InadequateSecurity = 0xc,
    Http11Required = 0xd,
};

// SETTINGS parameters (§6.5.2, RFC 9218 §2.1).
namespace http2_setting {
constexpr uint16_t kHeaderTableSize = 0x1;
constexpr uint16_t kEnablePush = 0x2;
constexpr uint16_t kMaxConcurrentStreams = 0x3;
constexpr uint16_t kInitialWindowSize = 0x4;
constexpr uint16_t kMaxFrameSize = 0x5;
constexpr uint16_t kMaxHeaderListSize = 0x6;
constexpr uint16_t kNoRfc7540Priorities = 0x9;
} // namespace http2_setting

constexpr size_t kHttp2FrameHeaderSize = 9;
constexpr uint32_t kHttp2DefaultMaxFrameSize = 16384; // §4.2, and what lepus accepts
constexpr uint32_t kHttp2MaxWindow = 0x7fffffff;      // §6.9.1
constexpr uint32_t kHttp2DefaultWindow = 65535;       // §6.9.2
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"; // §3.4

struct Http2FrameHeader {
    uint32_t length = 0; // of the payload
    Http2FrameType type = Http2FrameType::Data;
    uint8_t flags = 0;
    uint32_t stream_id = 0;
    bool has(uint8_t flag) const { return (flags & flag) != 0; }
};

// What the decoder reports. Each call returns false to stop decoding: the
// connection ends (the visitor queued a GOAWAY) and the rest is not read.
class Http2FrameVisitor {
public:
    virtual ~Http2FrameVisitor() = default;
    // A DATA frame starts: `header.length` (padding included) is what flow
    // control counts (§6.9.1). Its data follows in on_data pieces (none when
    // it is empty), then on_data_end.
    virtual bool on_data_begin(const Http2FrameHeader& header) = 0;
    virtual bool on_data(const Http2FrameHeader& header, std::string_view piece) = 0;
    virtual bool on_data_end(const Http2FrameHeader& header) = 0;
    // A complete header block: `first` is its HEADERS frame (END_STREAM is
    // there), `block` the fragments without padding and priority, joined.
    // `depends_on`: the stream the PRIORITY flag names (§5.3.1 forbids
    // itself), 0 without the flag.
    virtual bool on_headers(const Http2FrameHeader& first, uint32_t depends_on,
                            std::string_view block) = 0;
    virtual bool on_priority(uint32_t stream_id, uint32_t depends_on) = 0;
    virtual bool on_rst_stream(uint32_t stream_id, uint32_t error_code) = 0;
    // A SETTINGS frame whose values are all valid (§6.5.2): each parameter,
    // then on_settings_end; an ACK has none.
    virtual bool on_setting(uint16_t id, uint32_t value) = 0;
    virtual bool on_settings_end(bool ack) = 0;
    virtual bool on_ping(bool ack, std::string_view opaque_data) = 0;
    virtual bool on_goaway(uint32_t last_stream_id, uint32_t error_code) = 0;
    // `increment` may be 0, which is the visitor's error to report (§6.9).
    virtual bool on_window_update(uint32_t stream_id, uint32_t increment) = 0;
    // The byte stream is broken (a connection error, §5.4.1): the visitor
    // sends GOAWAY with `error`; nothing more is decoded.
    virtual void on_connection_error(Http2Error error, const char* why) = 0;
};

class Http2FrameDecoder {
public:
    // A header block in at most this many CONTINUATION frames, and at most
    // kMaxHeaderBlock bytes in all (CVE-2024-27316: past them,
    // ENHANCE_YOUR_CALM). 128 KiB of HPACK covers twice the header list lepus
    // accepts even sent as literals; browsers send a few hundred bytes.
    static constexpr uint32_t kMaxContinuations = 8;
    static constexpr size_t kMaxHeaderBlock = size_t{144} * 1024;

    // `expect_preface`: the input starts with the client preface (§3.4),
    // which is checked and skipped; the first frame must then be SETTINGS.
    explicit Http2FrameDecoder(bool expect_preface = true)
        : preface_left_(expect_preface ? 24 : 0) {
        first_frame_ = expect_preface;
    }

    // Decodes `input`, reporting every frame it completes to `visitor`.
    // False once decoding stopped (a connection error, or a visitor's false);
    // then later calls do nothing.
    bool feed(std::string_view input, Http2FrameVisitor& visitor);
    bool stopped() const { return stopped_; }

    // Whether a header block waits for its CONTINUATION (§6.10).
    bool in_header_block() const { return continuation_stream_ != 0; }
    // Bytes of gathering buffers the decoder holds now (idle: none).
    size_t held_bytes() const {
        return (payload_ ? payload_->capacity() : 0) + (block_ ? block_->capacity() : 0);
    }

private:
    bool start_frame(Http2FrameVisitor& visitor);
    bool check_frame(Http2FrameVisitor& visitor);
    bool data_bytes(std::string_view& input, Http2FrameVisitor& visitor);
    bool frame_payload(std::string_view payload, Http2FrameVisitor& visitor);
    bool headers_payload(std::string_view payload, Http2FrameVisitor& visitor);
    bool continuation_payload(std::string_view payload, Http2FrameVisitor& visitor);
    bool settings_payload(std::string_view payload, Http2FrameVisitor& visitor);
    bool fail(Http2FrameVisitor& visitor, Http2Error error, const char* why);

    // The gathering buffers, allocated only while a frame split across reads
    // or a header block continued by CONTINUATION is gathered (both rare):
    // an idle connection keeps neither, and two pointers instead of two
    // strings' inline room make the decoder 80 bytes instead of 128, part of
    // an idle HTTP/2 connection's engine (issue 38). The small members
    // follow together, without padding.
    std::unique_ptr<std::string> payload_; // a non-DATA payload split across reads
    // A header block in progress: its HEADERS frame, priority, fragments.
    std::unique_ptr<std::string> block_;
    Http2FrameHeader header_;
    Http2FrameHeader block_header_;
    uint32_t payload_left_ = 0; // of the current frame
    // DATA: how many data bytes follow the pad length (the rest of the
    // payload is padding).
    uint32_t data_left_ = 0;
    uint32_t continuation_stream_ = 0;
    uint32_t block_depends_on_ = 0;
    uint32_t continuations_ = 0;
    char header_bytes_[kHttp2FrameHeaderSize] = {};
    uint8_t preface_left_; // at most 24
    uint8_t header_have_ = 0;
    bool first_frame_ = false;
    bool stopped_ = false;
    bool in_frame_ = false;
    bool pad_length_pending_ = false; // DATA: the pad length byte is still to come
};

// Writers: each appends one frame (or a HEADERS and its CONTINUATIONs) to `out`.
void http2_write_frame_header(char* out, uint32_t length, Http2FrameType type, uint8_t flags,
                              uint32_t stream_id);
void http2_append_settings(Http2Output& out, std::span<const std::pair<uint16_t, uint32_t>> values);
void http2_append_settings_ack(Http2Output& out);
void http2_append_ping_ack(Http2Output& out, std::string_view opaque_data);
void http2_append_goaway(Http2Output& out, uint32_t last_stream_id, Http2Error error);
void http2_append_rst_stream(Http2Output& out, uint32_t stream_id, Http2Error error);
void http2_append_window_update(Http2Output& out, uint32_t stream_id, uint32_t increment);
// A header block as HEADERS, then CONTINUATION frames past `max_frame_size`.
void http2_append_headers(Http2Output& out, uint32_t stream_id, std::string_view block,
                          bool end_stream, uint32_t max_frame_size);

} // namespace lepus
