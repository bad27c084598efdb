#include "http/http2_frames.h"

#include "http/http2_output.h"

#include <algorithm>
#include <cstring>

namespace lepus {

namespace {

uint32_t read32(const char* at) {
    const auto* p = reinterpret_cast<const uint8_t*>(at);
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// §4.1: the high bit of a stream id (and of a dependency) is reserved, ignored.
uint32_t read31(const char* at) {
    return read32(at) & 0x7fffffff;
}

void write32(char* at, uint32_t value) {
    at[0] = char(value >> 24);
    at[1] = char(value >> 16);
    at[2] = char(value >> 8);
    at[3] = char(value);
}

} // namespace

bool Http2FrameDecoder::feed(std::string_view input, Http2FrameVisitor& visitor) {
    while (!input.empty() && !stopped_) {
        if (preface_left_ > 0) {
            size_t offset = kHttp2Preface.size() - preface_left_;
            size_t chunk = std::min<size_t>(input.size(), preface_left_);
            if (input.substr(0, chunk) != kHttp2Preface.substr(offset, chunk))
                return fail(visitor, Http2Error::ProtocolError, "not the client preface");
            preface_left_ -= static_cast<uint8_t>(chunk);
            input.remove_prefix(chunk);
            continue;
        }
        if (!in_frame_) {
            size_t chunk = std::min(input.size(), kHttp2FrameHeaderSize - header_have_);
            std::memcpy(header_bytes_ + header_have_, input.data(), chunk);
            header_have_ += static_cast<uint8_t>(chunk);
            input.remove_prefix(chunk);
            if (header_have_ < kHttp2FrameHeaderSize) break;
            header_have_ = 0;
            if (!start_frame(visitor)) return false;
            continue;
        }
        if (header_.type == Http2FrameType::Data) {
            if (!data_bytes(input, visitor)) return false;
            continue;
        }
        // Another frame: handed on as a view when this read holds it whole.
        if (!payload_ && input.size() >= payload_left_) {
            std::string_view payload = input.substr(0, payload_left_);
            input.remove_prefix(payload_left_);
            payload_left_ = 0;
            in_frame_ = false;
            if (!frame_payload(payload, visitor)) return false;
            continue;
        }
        size_t chunk = std::min<size_t>(input.size(), payload_left_);
        if (!payload_) {
            payload_ = std::make_unique<std::string>();
            payload_->reserve(payload_left_);
        }
        payload_->append(input.data(), chunk);
        input.remove_prefix(chunk);
        payload_left_ -= uint32_t(chunk);
        if (payload_left_ > 0) break;
        in_frame_ = false;
        // Gathered: the buffer goes once the frame is handled (split frames are rare).
        const std::unique_ptr<std::string> payload = std::move(payload_);
        if (!frame_payload(*payload, visitor)) return false;
    }
    return !stopped_;
}

bool Http2FrameDecoder::start_frame(Http2FrameVisitor& visitor) {
    const auto* h = reinterpret_cast<const uint8_t*>(header_bytes_);
    header_.length = uint32_t(h[0]) << 16 | uint32_t(h[1]) << 8 | h[2];
    header_.type = Http2FrameType(h[3]);
    header_.flags = h[4];
    header_.stream_id = read31(header_bytes_ + 5);
    if (!check_frame(visitor)) return false;
    payload_left_ = header_.length;
    in_frame_ = true;
    if (header_.type == Http2FrameType::Data) {
        pad_length_pending_ = header_.has(http2_flag::kPadded);
        data_left_ = pad_length_pending_ ? 0 : header_.length;
        if (!visitor.on_data_begin(header_)) return stopped_ = true, false;
        if (header_.length == 0) {
            in_frame_ = false;
            if (!visitor.on_data_end(header_)) return stopped_ = true, false;
        }
        return true;
    }
    if (header_.length == 0) {
        in_frame_ = false;
        return frame_payload({}, visitor);
    }
    return true;
}

// The checks a frame's header allows before its payload: §4.2's sizes, §6's
// stream 0 rules, the header block that may not be interrupted (§6.10).
bool Http2FrameDecoder::check_frame(Http2FrameVisitor& visitor) {
    using T = Http2FrameType;
    const Http2FrameHeader& h = header_;
    if (h.length > kHttp2DefaultMaxFrameSize)
        return fail(visitor, Http2Error::FrameSizeError,
                    "frame larger than SETTINGS_MAX_FRAME_SIZE");
    if (first_frame_) {
        // §3.4: the preface ends with a SETTINGS frame.
        first_frame_ = false;
        if (h.type != T::Settings || h.has(http2_flag::kAck))
            return fail(visitor, Http2Error::ProtocolError,
                        "the preface is not followed by SETTINGS");
    }
    if (continuation_stream_ != 0 &&
        (h.type != T::Continuation || h.stream_id != continuation_stream_))
        return fail(visitor, Http2Error::ProtocolError, "a header block was interrupted");
    switch (h.type) {
    case T::Data:
        if (h.stream_id == 0) return fail(visitor, Http2Error::ProtocolError, "DATA on stream 0");
        if (h.has(http2_flag::kPadded) && h.length == 0)
            return fail(visitor, Http2Error::FrameSizeError, "padded DATA without a pad length");
        return true;
    case T::Headers:
        if (h.stream_id == 0)
            return fail(visitor, Http2Error::ProtocolError, "HEADERS on stream 0");
        return true;
    case T::Priority:
        if (h.stream_id == 0)
            return fail(visitor, Http2Error::ProtocolError, "PRIORITY on stream 0");
        if (h.length != 5) return fail(visitor, Http2Error::FrameSizeError, "PRIORITY not 5 bytes");
        return true;
    case T::RstStream:
        if (h.stream_id == 0)
            return fail(visitor, Http2Error::ProtocolError, "RST_STREAM on stream 0");
        if (h.length != 4)
            return fail(visitor, Http2Error::FrameSizeError, "RST_STREAM not 4 bytes");
        return true;
    case T::Settings:
        if (h.stream_id != 0)
            return fail(visitor, Http2Error::ProtocolError, "SETTINGS on a stream");
        if (h.has(http2_flag::kAck) && h.length != 0)
            return fail(visitor, Http2Error::FrameSizeError, "SETTINGS ACK with a payload");
        if (h.length % 6 != 0)
            return fail(visitor, Http2Error::FrameSizeError, "SETTINGS not a multiple of 6 bytes");
        return true;
    case T::PushPromise:
        // §8.4: a client cannot push.
        return fail(visitor, Http2Error::ProtocolError, "PUSH_PROMISE from a client");
    case T::Ping:
        if (h.stream_id != 0) return fail(visitor, Http2Error::ProtocolError, "PING on a stream");
        if (h.length != 8) return fail(visitor, Http2Error::FrameSizeError, "PING not 8 bytes");
        return true;
    case T::Goaway:
        if (h.stream_id != 0) return fail(visitor, Http2Error::ProtocolError, "GOAWAY on a stream");
        if (h.length < 8) return fail(visitor, Http2Error::FrameSizeError, "GOAWAY under 8 bytes");
        return true;
    case T::WindowUpdate:
        if (h.length != 4)
            return fail(visitor, Http2Error::FrameSizeError, "WINDOW_UPDATE not 4 bytes");
        return true;
    case T::Continuation:
        if (continuation_stream_ == 0)
            return fail(visitor, Http2Error::ProtocolError, "CONTINUATION without HEADERS");
        if (++continuations_ > kMaxContinuations || block_->size() + h.length > kMaxHeaderBlock)
            return fail(visitor, Http2Error::EnhanceYourCalm, "a header block too long");
        return true;
    }
    return true; // an unknown type: skipped (§4.1)
}

// DATA payload bytes: the pad length, then data handed on as views, then padding.
bool Http2FrameDecoder::data_bytes(std::string_view& input, Http2FrameVisitor& visitor) {
    if (pad_length_pending_) {
        auto pad = uint8_t(input[0]);
        input.remove_prefix(1);
        --payload_left_;
        pad_length_pending_ = false;
        // §6.1: padding as long as the payload, or longer, is a PROTOCOL_ERROR.
        if (pad > payload_left_)
            return fail(visitor, Http2Error::ProtocolError, "DATA padding exceeds the payload");
        data_left_ = payload_left_ - pad;
    }
    size_t chunk = std::min<size_t>(input.size(), data_left_);
    if (chunk > 0) {
        data_left_ -= uint32_t(chunk);
        payload_left_ -= uint32_t(chunk);
        std::string_view piece = input.substr(0, chunk);
        input.remove_prefix(chunk);
        if (!visitor.on_data(header_, piece)) return stopped_ = true, false;
    }
    if (data_left_ == 0) {
        size_t padding = std::min<size_t>(input.size(), payload_left_);
        payload_left_ -= uint32_t(padding);
        input.remove_prefix(padding);
    }
    if (payload_left_ > 0 || pad_length_pending_) return true;
    in_frame_ = false;
    if (!visitor.on_data_end(header_)) return stopped_ = true, false;
    return true;
}

bool Http2FrameDecoder::frame_payload(std::string_view payload, Http2FrameVisitor& visitor) {
    using T = Http2FrameType;
    const Http2FrameHeader& h = header_;
    bool going = true;
    switch (h.type) {
    case T::Headers:
        return headers_payload(payload, visitor);
    case T::Continuation:
        return continuation_payload(payload, visitor);
    case T::Priority:
        going = visitor.on_priority(h.stream_id, read31(payload.data()));
        break;
    case T::RstStream:
        going = visitor.on_rst_stream(h.stream_id, read32(payload.data()));
        break;
    case T::Settings:
        return settings_payload(payload, visitor);
    case T::Ping:
        going = visitor.on_ping(h.has(http2_flag::kAck), payload);
        break;
    case T::Goaway:
        going = visitor.on_goaway(read31(payload.data()), read32(payload.data() + 4));
        break;
    case T::WindowUpdate:
        going = visitor.on_window_update(h.stream_id, read31(payload.data()));
        break;
    default:
        break; // unknown: ignored
    }
    if (!going) stopped_ = true;
    return going;
}

bool Http2FrameDecoder::headers_payload(std::string_view payload, Http2FrameVisitor& visitor) {
    const Http2FrameHeader& h = header_;
    size_t pad = 0;
    if (h.has(http2_flag::kPadded)) {
        if (payload.empty())
            return fail(visitor, Http2Error::FrameSizeError, "padded HEADERS without a pad length");
        pad = uint8_t(payload[0]);
        payload.remove_prefix(1);
    }
    uint32_t depends_on = 0;
    if (h.has(http2_flag::kPriority)) {
        if (payload.size() < 5)
            return fail(visitor, Http2Error::FrameSizeError, "HEADERS too short for its priority");
        depends_on = read31(payload.data());
        payload.remove_prefix(5);
    }
    if (pad > payload.size())
        return fail(visitor, Http2Error::ProtocolError, "HEADERS padding exceeds the payload");
    payload.remove_suffix(pad);
    if (h.has(http2_flag::kEndHeaders)) {
        if (!visitor.on_headers(h, depends_on, payload)) return stopped_ = true, false;
        return true;
    }
    continuation_stream_ = h.stream_id;
    block_header_ = h;
    block_depends_on_ = depends_on;
    continuations_ = 0;
    block_ = std::make_unique<std::string>(payload);
    return true;
}

bool Http2FrameDecoder::continuation_payload(std::string_view payload, Http2FrameVisitor& visitor) {
    block_->append(payload);
    if (!header_.has(http2_flag::kEndHeaders)) return true;
    continuation_stream_ = 0;
    const std::unique_ptr<std::string> block = std::move(block_); // freed once handled
    bool going = visitor.on_headers(block_header_, block_depends_on_, *block);
    if (!going) stopped_ = true;
    return going;
}

bool Http2FrameDecoder::settings_payload(std::string_view payload, Http2FrameVisitor& visitor) {
    // §6.5.2: every value is checked before any applies.
    for (size_t at = 0; at < payload.size(); at += 6) {
        auto id = uint16_t(uint8_t(payload[at]) << 8 | uint8_t(payload[at + 1]));
        uint32_t value = read32(payload.data() + at + 2);
        if (id == http2_setting::kEnablePush && value > 1)
            return fail(visitor, Http2Error::ProtocolError, "SETTINGS_ENABLE_PUSH not 0 or 1");
        if (id == http2_setting::kInitialWindowSize && value > kHttp2MaxWindow)
            return fail(visitor, Http2Error::FlowControlError,
                        "SETTINGS_INITIAL_WINDOW_SIZE too large");
        if (id == http2_setting::kMaxFrameSize && (value < 16384 || value > 0xffffff))
            return fail(visitor, Http2Error::ProtocolError, "SETTINGS_MAX_FRAME_SIZE out of range");
    }
    for (size_t at = 0; at < payload.size(); at += 6) {
        auto id = uint16_t(uint8_t(payload[at]) << 8 | uint8_t(payload[at + 1]));
        if (!visitor.on_setting(id, read32(payload.data() + at + 2))) return stopped_ = true, false;
    }
    if (!visitor.on_settings_end(header_.has(http2_flag::kAck))) return stopped_ = true, false;
    return true;
}

bool Http2FrameDecoder::fail(Http2FrameVisitor& visitor, Http2Error error, const char* why) {
    stopped_ = true;
    visitor.on_connection_error(error, why);
    return false;
}

void http2_write_frame_header(char* out, uint32_t length, Http2FrameType type, uint8_t flags,
                              uint32_t stream_id) {
    out[0] = char(length >> 16);
    out[1] = char(length >> 8);
    out[2] = char(length);
    out[3] = char(type);
    out[4] = char(flags);
    write32(out + 5, stream_id);
}

namespace {

void append_frame(Http2Output& out, Http2FrameType type, uint8_t flags, uint32_t stream_id,
                  std::string_view payload) {
    char header[kHttp2FrameHeaderSize];
    http2_write_frame_header(header, uint32_t(payload.size()), type, flags, stream_id);
    out.append({header, sizeof header});
    if (!payload.empty()) out.append(payload);
}

} // namespace

void http2_append_settings(Http2Output& out,
                           std::span<const std::pair<uint16_t, uint32_t>> values) {
    char payload[6 * 8];
    size_t size = 0;
    for (const auto& [id, value] : values) {
        if (size + 6 > sizeof payload) break;
        payload[size] = char(id >> 8);
        payload[size + 1] = char(id);
        write32(payload + size + 2, value);
        size += 6;
    }
    append_frame(out, Http2FrameType::Settings, 0, 0, {payload, size});
}

void http2_append_settings_ack(Http2Output& out) {
    append_frame(out, Http2FrameType::Settings, http2_flag::kAck, 0, {});
}

void http2_append_ping_ack(Http2Output& out, std::string_view opaque_data) {
    append_frame(out, Http2FrameType::Ping, http2_flag::kAck, 0, opaque_data.substr(0, 8));
}

void http2_append_goaway(Http2Output& out, uint32_t last_stream_id, Http2Error error) {
    char payload[8];
    write32(payload, last_stream_id);
    write32(payload + 4, uint32_t(error));
    append_frame(out, Http2FrameType::Goaway, 0, 0, {payload, sizeof payload});
}

void http2_append_rst_stream(Http2Output& out, uint32_t stream_id, Http2Error error) {
    char payload[4];
    write32(payload, uint32_t(error));
    append_frame(out, Http2FrameType::RstStream, 0, stream_id, {payload, sizeof payload});
}

void http2_append_window_update(Http2Output& out, uint32_t stream_id, uint32_t increment) {
    char payload[4];
    write32(payload, increment);
    append_frame(out, Http2FrameType::WindowUpdate, 0, stream_id, {payload, sizeof payload});
}

void http2_append_headers(Http2Output& out, uint32_t stream_id, std::string_view block,
                          bool end_stream, uint32_t max_frame_size) {
    Http2FrameType type = Http2FrameType::Headers;
    uint8_t flags = end_stream ? http2_flag::kEndStream : 0;
    do {
        std::string_view piece = block.substr(0, max_frame_size);
        block.remove_prefix(piece.size());
        if (block.empty()) flags |= http2_flag::kEndHeaders;
        append_frame(out, type, flags, stream_id, piece);
        type = Http2FrameType::Continuation; // §6.10: END_STREAM stays on the HEADERS
        flags = 0;
    } while (!block.empty());
}

} // namespace lepus
