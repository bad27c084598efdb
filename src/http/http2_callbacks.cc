#include "http/detail/http2_callbacks.h"

#include "http/detail/http2_stream.h"
#include "http/http2_engine.h"
#include "log/error_log.h"

#include <algorithm>
#include <cstring>

namespace lepus {

void Http2Callbacks::install(nghttp2_session_callbacks* callbacks) {
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, on_invalid_frame_recv);
    nghttp2_session_callbacks_set_send_data_callback(callbacks, send_data);
}

Http2Engine& Http2Callbacks::engine(void* user_data) {
    return *static_cast<Http2Engine*>(user_data);
}

// nghttp2 calls back for one stream many times in a row (each header field,
// then the end of the block): the last stream found is looked at first.
Http2Stream* Http2Callbacks::find(Http2Engine& self, int32_t id) {
    if (self.last_found_ && self.last_found_->id == id) return self.last_found_;
    auto it = self.streams_.find(id);
    if (it == self.streams_.end()) return nullptr;
    self.last_found_ = it->second.get();
    return self.last_found_;
}

// Frames on streams that are over. With RFC 9218 priorities nghttp2 keeps
// no closed stream, and it ignores frames for streams it does not know;
// the RFC wants errors: a HEADERS frame opening a stream below one already
// used is a PROTOCOL_ERROR (§5.1.1), HEADERS or DATA on a stream the client
// closed or reset is a STREAM_CLOSED one (§5.1). Frames on a stream lepus
// reset or refused are ignored, as §5.1 and §5.4.2 ask (the client may have
// sent them before it saw the RST_STREAM): see ignores_frames_on.
int Http2Callbacks::on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd,
                                   void* user_data) {
    Http2Engine& self = engine(user_data);
    int32_t id = hd->stream_id;
    if (id == 0 || id % 2 == 0 || (hd->type != NGHTTP2_HEADERS && hd->type != NGHTTP2_DATA))
        return 0;
    if (id > self.highest_stream_id_) {
        if (hd->type == NGHTTP2_HEADERS) self.stream_id_used(id);
        return 0; // a new stream (DATA on an idle one is nghttp2's error)
    }
    if (nghttp2_session_find_stream(session, id) || self.ignores_frames_on(id)) return 0;
    bool lower_new_stream = hd->type == NGHTTP2_HEADERS && id < self.highest_stream_id_;
    self.terminate(lower_new_stream ? NGHTTP2_PROTOCOL_ERROR : NGHTTP2_STREAM_CLOSED);
    return 0;
}

int Http2Callbacks::on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                     void* user_data) {
    Http2Engine& self = engine(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    // A GOAWAY that ends the connection is queued: nothing new starts (nghttp2
    // ignores the input after it anyway, see Http2Engine::feed).
    if (self.stop_reading_) return 0;
    if (self.refuses_new_stream()) {
        // Streams that cannot send hold too much already: no Http2Stream, so
        // the block's fields are decoded (HPACK stays in step) and dropped.
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        if (!self.refused_for_memory_)
            log_info("client %s: HTTP/2: streams that wait for the client to take their answers "
                     "hold too much memory: refusing new streams",
                     self.info_.peer.to_string().c_str());
        self.refused_for_memory_ = true;
        return 0;
    }
    auto it = self.streams_
                  .emplace(frame->hd.stream_id, std::make_unique<Http2Stream>(frame->hd.stream_id))
                  .first;
    self.last_found_ = it->second.get();
    self.stream_opened(frame->hd.stream_id);
    if (self.gauges_) {
        self.gauges_->streams.fetch_add(1, std::memory_order_relaxed);
        self.gauges_->streams_total.fetch_add(1, std::memory_order_relaxed);
    }
    return 0;
}

int Http2Callbacks::on_header(nghttp2_session*, const nghttp2_frame* frame,
                              const uint8_t* name_bytes, size_t name_length,
                              const uint8_t* value_bytes, size_t value_length, uint8_t,
                              void* user_data) {
    Http2Engine& self = engine(user_data);
    Http2Stream* stream = find(self, frame->hd.stream_id);
    if (!stream) return 0;
    // As SETTINGS_MAX_HEADER_LIST_SIZE counts (RFC 9113 §6.5.2): past the
    // limit the fields are dropped and the request answered 431. Far past it
    // (decoded bytes, trailers included: a one-byte HPACK reference can stand
    // for a 4 KB field) the stream is reset, so that nghttp2 stops checking
    // fields and calling back for the rest of the block, which it only decodes.
    stream->header_bytes += name_length + value_length + 32;
    if (stream->header_bytes > Http2Engine::kMaxHeaderListDecoded)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (stream->started) return 0; // trailers: not used
    if (stream->header_bytes > Http2Engine::kMaxHeaderList) stream->too_large = true;
    if (stream->too_large) return 0;
    std::string_view name(reinterpret_cast<const char*>(name_bytes), name_length);
    std::string_view value(reinterpret_cast<const char*>(value_bytes), value_length);
    if (name == ":method") {
        stream->method = stream->keep(value);
    } else if (name == ":path") {
        stream->path = stream->keep(value);
    } else if (name == ":authority") {
        stream->authority = stream->keep(value);
        stream->has_authority = true;
    } else if (name == ":scheme") {
        // https or http: the connection says which.
    } else if (name == "cookie") {
        // §8.2.3: split cookies are joined with "; " for an HTTP/1.1 context (CGI).
        if (!stream->cookie.empty()) stream->cookie.append("; ");
        stream->cookie.append(value);
    } else {
        if (stream->fields.empty()) stream->fields.reserve(16);
        auto field = std::pair{stream->keep(name), stream->keep(value)};
        if (name == "host" && stream->host_fields++ == 0) stream->host_field = field.second;
        stream->fields.push_back(field);
    }
    return 0;
}

int Http2Callbacks::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Http2Engine& self = engine(user_data);
    if (frame->hd.type == NGHTTP2_RST_STREAM) self.count_reset();
    Http2Stream* stream = find(self, frame->hd.stream_id);
    if (!stream) return 0;
    bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (end_stream) stream->request_ended = true;
        if (!stream->started)
            self.start_exchange(*stream);
        else if (end_stream)
            self.offer_body(*stream); // trailers end the body
        break;
    case NGHTTP2_DATA:
        if (end_stream) {
            stream->request_ended = true;
            self.offer_body(*stream);
        }
        break;
    default:
        break;
    }
    return 0;
}

int Http2Callbacks::on_data_chunk_recv(nghttp2_session* session, uint8_t, int32_t stream_id,
                                       const uint8_t* data, size_t length, void* user_data) {
    Http2Engine& self = engine(user_data);
    Http2Stream* stream = find(self, stream_id);
    if (!stream || !stream->exchange.stream) {
        // Nobody reads this body (a file, an error, a reset stream): the
        // window is given back at once.
        nghttp2_session_consume(session, stream_id, length);
        if (stream) stream->body_received += length;
        return 0;
    }
    stream->body_received += length;
    stream->body_active_ms = self.context_.clock.now_ms;
    stream->body_rate.moved(length);
    if (stream->body_received > self.context_.options.max_body_size && !stream->submitted) {
        nghttp2_session_consume(session, stream_id, length);
        self.fail_exchange(*stream, 413);
        return 0;
    }
    // Acknowledged (WINDOW_UPDATE) only as the backend takes the bytes.
    stream->body_pending.append(reinterpret_cast<const char*>(data), length);
    self.offer_body(*stream);
    return 0;
}

int Http2Callbacks::on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t,
                                    void* user_data) {
    Http2Engine& self = engine(user_data);
    auto it = self.streams_.find(stream_id);
    if (it == self.streams_.end()) return 0;
    self.finish_stream(*it->second);
    if (self.last_found_ == it->second.get()) self.last_found_ = nullptr;
    self.streams_.erase(it);
    return 0;
}

// Every RST_STREAM lepus sends, its own or nghttp2's (a refused stream, a
// stream error such as a window overflow, §6.9.1): counted, and remembered.
int Http2Callbacks::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_RST_STREAM) return 0;
    Http2Engine& self = engine(user_data);
    self.reset_sent(frame->hd.stream_id);
    self.count_reset();
    return 0;
}

// A frame nghttp2 found invalid on a stream (a window overflow, §6.9.1):
// it has queued an RST_STREAM, sent at the next write; until then the stream
// is not polled (its answer would ask for a backend connection).
int Http2Callbacks::on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame* frame, int,
                                          void* user_data) {
    if (Http2Stream* stream = find(engine(user_data), frame->hd.stream_id))
        stream->reset_queued = true;
    return 0;
}

// DATA for a response: from the complete Response's memory and file, or
// from the response stream as the backend delivers.
ssize_t Http2Callbacks::read_body(nghttp2_session*, int32_t, uint8_t* buffer, size_t length,
                                  uint32_t* flags, nghttp2_data_source* source, void* user_data) {
    Http2Engine& self = engine(user_data);
    Http2Stream& stream = *static_cast<Http2Stream*>(source->ptr);
    Exchange& exchange = stream.exchange;
    if (stream.relaying) {
        ResponseStream& backend = *exchange.stream;
        std::span<const char> body = backend.body();
        size_t n = std::min(length, body.size());
        std::memcpy(buffer, body.data(), n);
        backend.consume(n);
        stream.body_sent += n;
        if (backend.body().empty() && backend.ended()) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            stream.accounted = true;
            self.context_.handler.account(exchange, stream.status, stream.body_sent);
        } else if (n == 0) {
            stream.deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        return ssize_t(n);
    }
    const Response& response = exchange.response;
    // NO_COPY: send_data queues each frame itself, its payload never
    // copied into nghttp2's buffer; see send_data for where it goes.
    uint64_t n = std::min<uint64_t>(length, response.body_bytes() - stream.body_sent);
    if (stream.body_sent < response.body.size())
        n = std::min<uint64_t>(n, response.body.size() - stream.body_sent); // memory, then file
    stream.frame_at = stream.body_sent;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    stream.body_sent += n;
    if (stream.body_sent >= response.body_bytes()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return ssize_t(n);
}

// A DATA frame read_body announced with NO_COPY: its 9-byte header, then
// `length` bytes of the body from stream.frame_at. No padding is ever
// asked for, so frame->data.padlen is 0. The stream may close before the
// bytes leave (see http2_output.h): a payload left out of the output is
// kept alive by a FileRef of the segment's own.
int Http2Callbacks::send_data(nghttp2_session*, nghttp2_frame*, const uint8_t* header,
                              size_t length, nghttp2_data_source* source, void* user_data) {
    Http2Engine& self = engine(user_data);
    Http2Stream& stream = *static_cast<Http2Stream*>(source->ptr);
    const Response& response = stream.exchange.response;
    std::string_view frame_header(reinterpret_cast<const char*>(header), 9);
    if (stream.frame_at < response.body.size()) {
        std::string_view payload = response.body.substr(stream.frame_at, length);
        send_memory_data(self.output_, frame_header, response, payload);
        return 0;
    }
    uint64_t file_at = response.file_offset + (stream.frame_at - response.body.size());
    int error = send_file_data(self, frame_header, response, file_at, length);
    if (error == 0) return 0;
    // The file shrank or broke under us: the stream cannot complete.
    report_internal_error("pread for an HTTP/2 response", stream.exchange.request->path, error);
    // The frame never was: nghttp2 resets the stream (on_frame_send remembers it).
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

// A payload from memory. The contents of a cached file (a small static
// file) stay where they are, a segment of the output, on either transport
// (writev takes them as they are, TLS included); anything else (a
// generated page in owned_body) lives no longer than the Response, which
// may go before the frame is written, so it is copied now.
void Http2Callbacks::send_memory_data(Http2Output& output, std::string_view header,
                                      const Response& response, std::string_view payload) {
    // A small payload is cheaper copied than sent as a piece of its own:
    // pieces are what the batch is capped on (64 per writev), and h2c `/`
    // (612 bytes under h2load -m10) lost 4% per core as segments.
    constexpr size_t kCopyBelow = 2048;
    if (payload.size() >= kCopyBelow && response.file && response.file->holds(response.body)) {
        output.append_memory(header, response.file, payload.data(), payload.size());
        return;
    }
    output.append(header);
    output.append(payload);
}

// A payload from the file: read into the output now (pread), or, with
// --h2c-sendfile on a plain connection, left in the file for
// write_output's sendfile. A Response with a file_fd
// always has the FileRef that owns it (the static handler, error pages);
// without one the bytes are copied now, never left to an fd nobody keeps
// open. 0, or the errno value of a failed read.
int Http2Callbacks::send_file_data(Http2Engine& self, std::string_view header,
                                   const Response& response, uint64_t file_at, size_t length) {
    if (self.context_.options.h2c_sendfile && self.transport_.zero_copy_files() && response.file) {
        self.output_.append_file(header, response.file, response.file_fd, file_at, length);
        return 0;
    }
    return self.output_.append_file_copy(header, response.file_fd, file_at, length);
}
} // namespace lepus
