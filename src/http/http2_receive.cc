// Http2Engine's side of the frames the client sends (Http2FrameVisitor): the
// stream states (RFC 9113 §5.1), flow control (§5.2, §6.9), SETTINGS and PING,
// and the limits on what a client may make the server do for nothing (see
// http2_engine.h). Framing errors the decoder finds arrive here as
// on_connection_error.
#include "http/detail/http2_stream.h"
#include "http/http2_engine.h"
#include "log/error_log.h"

#include <algorithm>

namespace lepus {

namespace {

// The decoded fields of the block being read, shared by the thread's
// connections: a block is taken apart before the next is decoded, so an
// idle connection keeps none of it.
HpackHeaderList& decoded_fields() {
    thread_local HpackHeaderList fields;
    return fields;
}

bool client_stream(uint32_t id) {
    return id % 2 == 1;
}

} // namespace

Http2Stream* Http2Engine::find(uint32_t id) {
    // Frames of one stream come in runs (HEADERS, DATA, DATA): the last found first.
    if (last_found_ && last_found_->id == int32_t(id) && !last_found_->closed) return last_found_;
    for (auto& stream : streams_)
        if (stream->id == int32_t(id) && !stream->closed) return last_found_ = stream.get();
    return nullptr;
}

void Http2Engine::close_stream(Http2Stream& stream) {
    if (stream.closed) return;
    stream.closed = true;
    ++closed_streams_;
}

void Http2Engine::sweep_streams() {
    if (closed_streams_ == 0) return;
    last_found_ = nullptr;
    std::erase_if(streams_, [this](std::unique_ptr<Http2Stream>& stream) {
        if (!stream->closed) return false;
        finish_stream(*stream);
        return true;
    });
    closed_streams_ = 0;
}

bool Http2Engine::on_headers(const Http2FrameHeader& first, uint32_t depends_on,
                             std::string_view block) {
    uint32_t id = first.stream_id;
    // §5.1.1: a client's streams are odd; a new one above all before it.
    if (!client_stream(id)) {
        terminate(Http2Error::ProtocolError);
        return false;
    }
    if (id > highest_stream_id_) return open_stream(first, depends_on, block);
    if (Http2Stream* stream = find(id)) return stream_trailers(*stream, first, block);
    if (!decode_block(block, nullptr)) return false;
    // A HEADERS below the highest id on a stream never opened is a new
    // stream out of order; on one closed, a frame on a closed stream.
    return frame_on_closed_stream(id, true);
}

bool Http2Engine::open_stream(const Http2FrameHeader& first, uint32_t depends_on,
                              std::string_view block) {
    uint32_t id = first.stream_id;
    stream_id_used(id);
    // After our GOAWAY no stream starts (§6.8); the block still keeps HPACK in step.
    if (goaway_sent_ || stop_reading_) return decode_block(block, nullptr);
    bool refuse = open_streams() >= kMaxConcurrentStreams; // §5.1.2
    if (!refuse && refuses_new_stream()) {
        // Streams that cannot send hold too much already.
        if (!refused_for_memory_)
            log_info("client %s: HTTP/2: streams that wait for the client to take their answers "
                     "hold too much memory: refusing new streams",
                     info_.peer.to_string().c_str());
        refused_for_memory_ = true;
        refuse = true;
    }
    if (refuse || depends_on == id) {
        if (!decode_block(block, nullptr)) return false;
        // §5.3.1: a stream that depends on itself is a stream error.
        reset_stream(id, refuse ? Http2Error::RefusedStream : Http2Error::ProtocolError);
        return !stop_reading_;
    }
    streams_.push_back(std::make_unique<Http2Stream>(int32_t(id)));
    Http2Stream& stream = *streams_.back();
    last_found_ = &stream;
    stream_opened(id);
    if (gauges_) {
        gauges_->streams.fetch_add(1, std::memory_order_relaxed);
        gauges_->streams_total.fetch_add(1, std::memory_order_relaxed);
    }
    stream.send_window = peer_initial_window_;
    stream.receive_window = kStreamWindow;
    if (!decode_block(block, &stream)) return false;
    if (stream.reset_queued) return !stop_reading_;
    if (!stream.too_large && !stream.head_complete()) {
        reset_stream(id, Http2Error::ProtocolError); // §8.1.1: malformed
        return !stop_reading_;
    }
    if (first.has(http2_flag::kEndStream)) {
        stream.request_ended = true;
        if (stream.expected_length > 0) {
            reset_stream(id, Http2Error::ProtocolError); // §8.1.1: a body was promised
            return !stop_reading_;
        }
    }
    start_exchange(stream);
    return !stop_reading_;
}

bool Http2Engine::stream_trailers(Http2Stream& stream, const Http2FrameHeader& first,
                                  std::string_view block) {
    if (!decode_block(block, nullptr)) return false;
    if (stream.request_ended) {
        reset_stream(uint32_t(stream.id), Http2Error::StreamClosed); // §5.1: half-closed (remote)
        return !stop_reading_;
    }
    // §8.1: trailers end the stream; their fields are checked, not kept.
    bool valid = first.has(http2_flag::kEndStream);
    HpackHeaderList& fields = decoded_fields();
    for (size_t i = 0; valid && i < fields.size(); ++i)
        valid = Http2Stream::valid_trailer(fields[i].name, fields[i].value);
    if (valid && stream.expected_length >= 0 &&
        uint64_t(stream.expected_length) != stream.body_received)
        valid = false;
    if (!valid) {
        reset_stream(uint32_t(stream.id), Http2Error::ProtocolError);
        return !stop_reading_;
    }
    stream.request_ended = true;
    offer_body(stream);
    if (stream.end_stream_sent) close_stream(stream);
    return true;
}

// Decodes a block, whatever becomes of its stream: the HPACK table must stay
// in step with the client's (RFC 7541 §2.2). With `stream`, its fields are kept
// (up to kMaxHeaderList, then 431), checked (a malformed request is reset) and
// counted; past kMaxHeaderListDecoded the stream is reset.
bool Http2Engine::decode_block(std::string_view block, Http2Stream* stream) {
    HpackHeaderList& fields = decoded_fields();
    HpackStatus status = hpack_decoder_.decode(
        {reinterpret_cast<const uint8_t*>(block.data()), block.size()}, fields);
    if (status == HpackStatus::CompressionError) {
        terminate(Http2Error::CompressionError); // §4.3
        return false;
    }
    if (!stream) return true;
    if (status == HpackStatus::HeaderListTooLarge) {
        reset_stream(uint32_t(stream->id), Http2Error::InternalError);
        return true;
    }
    stream->header_bytes = fields.list_size();
    if (stream->header_bytes > kMaxHeaderList) {
        stream->too_large = true; // answered 431; its fields are not kept
        return true;
    }
    // The decoded text in one copy: each field's value (and its name, unless
    // static) is then where it lies in it.
    std::string_view all = fields.text();
    if (stream->text.capacity() == 0) stream->text.reserve(std::max<size_t>(512, all.size()));
    auto base = uint32_t(stream->text.size());
    stream->text.append(all);
    for (size_t i = 0; i < fields.size(); ++i) {
        HpackField field = fields[i];
        auto value_at = base + uint32_t(fields.value_offset(i));
        Http2Stream::TextRef value{value_at, uint32_t(field.value.size())};
        Http2Stream::TextRef name{value_at - uint32_t(field.name.size()),
                                  uint32_t(field.name.size())};
        if (!stream->add_field(field.name, field.value, field.static_name_index, name, value)) {
            reset_stream(uint32_t(stream->id), Http2Error::ProtocolError);
            return true;
        }
    }
    return true;
}

// Frames on streams that are over. Frames on a stream lepus reset or refused
// are ignored, as §5.1 and §5.4.2 ask (the client may have sent them before it
// saw the RST_STREAM): see ignores_frames_on. Else a HEADERS opening a stream
// below one already used is a PROTOCOL_ERROR (§5.1.1), HEADERS or DATA on a
// stream the client closed or reset a STREAM_CLOSED one (§5.1).
bool Http2Engine::frame_on_closed_stream(uint32_t id, bool headers) {
    if (ignores_frames_on(id)) return true;
    bool lower_new_stream = headers && id < highest_stream_id_;
    terminate(lower_new_stream ? Http2Error::ProtocolError : Http2Error::StreamClosed);
    return false;
}

bool Http2Engine::on_data_begin(const Http2FrameHeader& header) {
    frame_data_ = 0;
    uint32_t id = header.stream_id;
    // §6.9.1: every DATA byte counts against the connection's window.
    receive_window_ -= header.length;
    if (receive_window_ < 0) {
        terminate(Http2Error::FlowControlError);
        return false;
    }
    if (!client_stream(id) || id > highest_stream_id_) {
        terminate(Http2Error::ProtocolError); // §5.1: DATA on an idle stream
        return false;
    }
    if (header.length == 0 && !header.has(http2_flag::kEndStream)) {
        roll_reset_window();
        if (++empty_frames_ > kMaxEmptyFrames) {
            log_info("client %s: HTTP/2: %u empty DATA frames: ENHANCE_YOUR_CALM",
                     info_.peer.to_string().c_str(), empty_frames_);
            terminate(Http2Error::EnhanceYourCalm);
            return false;
        }
    }
    Http2Stream* stream = find(id);
    if (!stream) return frame_on_closed_stream(id, false);
    if (stream->request_ended) {
        reset_stream(id, Http2Error::StreamClosed); // §5.1: half-closed (remote)
        return !stop_reading_;
    }
    stream->receive_window -= header.length;
    if (stream->receive_window < 0) {
        reset_stream(id, Http2Error::FlowControlError); // §6.9.1, a stream error
        return !stop_reading_;
    }
    return true;
}

bool Http2Engine::on_data(const Http2FrameHeader& header, std::string_view piece) {
    frame_data_ += uint32_t(piece.size());
    Http2Stream* stream = find(header.stream_id);
    if (!stream || stream->reset_queued) {
        consume(nullptr, piece.size()); // nobody reads it: the connection's window reopens
        return true;
    }
    size_t length = piece.size();
    stream->body_received += length;
    if (stream->expected_length >= 0 && stream->body_received > uint64_t(stream->expected_length)) {
        consume(stream, length);
        reset_stream(header.stream_id, Http2Error::ProtocolError); // §8.1.1
        return !stop_reading_;
    }
    if (!stream->exchange.stream) {
        // Nobody reads this body (a file, an error): the window is given back at once.
        consume(stream, length);
        return true;
    }
    stream->body_active_ms = context_.clock.now_ms;
    stream->body_rate.moved(length);
    if (stream->body_received > context_.options.max_body_size && !stream->submitted) {
        consume(stream, length);
        fail_exchange(*stream, 413);
        return true;
    }
    // Acknowledged (WINDOW_UPDATE) only as the backend takes the bytes.
    stream->body_pending.append(piece);
    offer_body(*stream);
    return true;
}

bool Http2Engine::on_data_end(const Http2FrameHeader& header) {
    Http2Stream* stream = find(header.stream_id);
    bool live = stream && !stream->reset_queued;
    // Padding (and the pad length) is flow-controlled but carries nothing.
    if (uint32_t padding = header.length - frame_data_; padding > 0)
        consume(live ? stream : nullptr, padding);
    if (!live || !header.has(http2_flag::kEndStream)) return true;
    if (stream->expected_length >= 0 &&
        uint64_t(stream->expected_length) != stream->body_received) {
        reset_stream(header.stream_id, Http2Error::ProtocolError); // §8.1.1
        return !stop_reading_;
    }
    stream->request_ended = true;
    offer_body(*stream);
    if (stream->end_stream_sent) close_stream(*stream);
    return true;
}

void Http2Engine::consume(Http2Stream* stream, size_t bytes) {
    // A WINDOW_UPDATE once half of a window is used, not one per frame (§6.9).
    receive_unacked_ += uint32_t(bytes);
    if (receive_unacked_ >= kConnectionWindow / 2) {
        http2_append_window_update(output(), 0, receive_unacked_);
        receive_window_ += receive_unacked_;
        receive_unacked_ = 0;
    }
    if (!stream || stream->request_ended || stream->reset_queued) return;
    stream->receive_unacked += uint32_t(bytes);
    if (stream->receive_unacked >= kStreamWindow / 2) {
        http2_append_window_update(output(), uint32_t(stream->id), stream->receive_unacked);
        stream->receive_window += stream->receive_unacked;
        stream->receive_unacked = 0;
    }
}

bool Http2Engine::on_priority(uint32_t stream_id, uint32_t depends_on) {
    // Ignored under RFC 9218, but §5.3.1 still forbids a stream depending on itself.
    if (depends_on != stream_id) return true;
    // A RST_STREAM cannot name an idle stream (§5.1): then the whole connection.
    if (find(stream_id)) {
        reset_stream(stream_id, Http2Error::ProtocolError);
        return !stop_reading_;
    }
    terminate(Http2Error::ProtocolError);
    return false;
}

bool Http2Engine::on_rst_stream(uint32_t stream_id, uint32_t) {
    if (!client_stream(stream_id) || stream_id > highest_stream_id_) {
        terminate(Http2Error::ProtocolError); // §6.4: RST_STREAM on an idle stream
        return false;
    }
    if (Http2Stream* stream = find(stream_id)) close_stream(*stream);
    count_reset();
    return !stop_reading_;
}

bool Http2Engine::on_setting(uint16_t id, uint32_t value) {
    if (++settings_values_ > kMaxSettingsValues) {
        terminate(Http2Error::EnhanceYourCalm);
        return false;
    }
    switch (id) {
    case http2_setting::kHeaderTableSize:
        hpack_encoder_.set_peer_max_table_size(value);
        break;
    case http2_setting::kInitialWindowSize: {
        // §6.9.2: the change applies to every open stream's window, which may
        // go negative; past 2^31-1 it is a FLOW_CONTROL_ERROR.
        int64_t delta = int64_t(value) - int64_t(peer_initial_window_);
        peer_initial_window_ = value;
        for (auto& stream : streams_) {
            stream->send_window += delta;
            if (stream->send_window > kHttp2MaxWindow) {
                terminate(Http2Error::FlowControlError);
                return false;
            }
        }
        break;
    }
    case http2_setting::kMaxFrameSize:
        peer_max_frame_size_ = value;
        break;
    default:
        break; // push is never used; the peer's other limits bind a client
    }
    return true;
}

bool Http2Engine::on_settings_end(bool ack) {
    settings_values_ = 0;
    if (ack) return true; // our settings hold (they only widened the defaults)
    http2_append_settings_ack(output());
    return count_ack();
}

bool Http2Engine::on_ping(bool ack, std::string_view opaque_data) {
    if (ack) return true;
    http2_append_ping_ack(output(), opaque_data);
    return count_ack();
}

bool Http2Engine::count_ack() {
    if (++queued_acks_ <= kMaxQueuedAcks) return true;
    log_info("client %s: HTTP/2: %u ACKs owed to a client that does not read: ENHANCE_YOUR_CALM",
             info_.peer.to_string().c_str(), queued_acks_);
    terminate(Http2Error::EnhanceYourCalm);
    return false;
}

bool Http2Engine::on_goaway(uint32_t, uint32_t) {
    // The client opens no more streams: those in flight finish, then we close.
    draining_ = true;
    return true;
}

bool Http2Engine::on_window_update(uint32_t stream_id, uint32_t increment) {
    if (stream_id == 0) {
        send_window_ += increment;
        if (increment == 0 || send_window_ > kHttp2MaxWindow) {
            terminate(increment == 0 ? Http2Error::ProtocolError : Http2Error::FlowControlError);
            return false;
        }
        return true;
    }
    if (!client_stream(stream_id) || stream_id > highest_stream_id_) {
        terminate(Http2Error::ProtocolError); // §5.1: WINDOW_UPDATE on an idle stream
        return false;
    }
    Http2Stream* stream = find(stream_id);
    if (!stream) return true; // closed: it may cross our END_STREAM or RST_STREAM
    stream->send_window += increment;
    if (increment == 0 || stream->send_window > kHttp2MaxWindow)
        reset_stream(stream_id,
                     increment == 0 ? Http2Error::ProtocolError : Http2Error::FlowControlError);
    return !stop_reading_;
}

void Http2Engine::on_connection_error(Http2Error error, const char* why) {
    log_info("client %s: HTTP/2: %s", info_.peer.to_string().c_str(), why);
    terminate(error);
}

void Http2Engine::reset_stream(uint32_t id, Http2Error error) {
    http2_append_rst_stream(output(), id, error);
    reset_sent(id);
    if (Http2Stream* stream = find(id)) {
        stream->reset_queued = true;
        close_stream(*stream);
    }
    if (error != Http2Error::NoError) count_reset();
}

// The memory of closed client streams: one bit per id among the last
// kRememberedStreams, set while frames on that stream are to be ignored.
// A new id is set (refused, until it opens), the ids it skips are cleared
// (idle, so closed: §5.1.1).
void Http2Engine::stream_id_used(uint32_t id) {
    auto bit = [](uint32_t at) { return size_t(at >> 1) % kRememberedStreams; };
    // The previous id never opened: it stays refused, now in the bitmap.
    if (newest_refused_) ignore_frames_on(highest_stream_id_);
    if (ignored_streams_) {
        auto& bits = *ignored_streams_;
        uint32_t from = highest_stream_id_ + 2;
        if (highest_stream_id_ == 0 || (id - highest_stream_id_) / 2 >= kRememberedStreams)
            bits.fill(0), from = id;
        for (uint32_t skipped = from; skipped < id; skipped += 2)
            bits[bit(skipped) / 64] &= ~(uint64_t{1} << bit(skipped) % 64);
        bits[bit(id) / 64] &= ~(uint64_t{1} << bit(id) % 64); // newest_refused_ says it
    }
    newest_refused_ = true;
    highest_stream_id_ = id;
    roll_reset_window();
    ++streams_opened_;
}

void Http2Engine::stream_opened(uint32_t id) {
    if (id == highest_stream_id_) newest_refused_ = false;
    if (!ignored_streams_) return;
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    (*ignored_streams_)[bit / 64] &= ~(uint64_t{1} << bit % 64);
}

void Http2Engine::reset_sent(uint32_t id) {
    if (!client_stream(id) || id > highest_stream_id_) return;
    ignore_frames_on(id);
}

void Http2Engine::ignore_frames_on(uint32_t id) {
    if (!ignored_streams_)
        ignored_streams_ = std::make_unique<std::array<uint64_t, kRememberedStreams / 64>>();
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    (*ignored_streams_)[bit / 64] |= uint64_t{1} << bit % 64;
}

bool Http2Engine::ignores_frames_on(uint32_t id) const {
    // Older than the memory: whatever it was, a late frame is let go.
    if ((highest_stream_id_ - id) / 2 >= kRememberedStreams) return true;
    if (id == highest_stream_id_ && newest_refused_) return true;
    if (!ignored_streams_) return false;
    size_t bit = size_t(id >> 1) % kRememberedStreams;
    return (*ignored_streams_)[bit / 64] >> bit % 64 & 1;
}

void Http2Engine::roll_reset_window() {
    if (context_.clock.now_ms - reset_window_ms_ < kResetWindowMs) return;
    reset_window_ms_ = context_.clock.now_ms;
    resets_ = 0;
    streams_opened_ = 0;
    empty_frames_ = 0;
}

void Http2Engine::count_reset() {
    roll_reset_window();
    ++resets_;
    bool mostly_resets = resets_ > kResetsTolerated && uint64_t{resets_} * 2 > streams_opened_;
    if (stop_reading_ || (!mostly_resets && resets_ <= kResetsMax)) return;
    log_info("client %s: HTTP/2: %u streams reset of %u opened in %llu s: ENHANCE_YOUR_CALM",
             info_.peer.to_string().c_str(), resets_, streams_opened_,
             static_cast<unsigned long long>(kResetWindowMs / 1000));
    terminate(Http2Error::EnhanceYourCalm);
}

void Http2Engine::terminate(Http2Error error) {
    if (stop_reading_) return;
    http2_append_goaway(output(), highest_stream_id_, error);
    goaway_sent_ = true;
    goaway_error_ = error;
    stop_reading_ = true;
}

} // namespace lepus
