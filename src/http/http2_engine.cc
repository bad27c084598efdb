#include "http/http2_engine.h"

#include "base/ascii.h"
#include "log/error_log.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <nghttp2/nghttp2.h>
#include <optional>
#include <vector>

namespace lepus {

// One stream: its request as received, its Exchange, and how its answer goes out.
struct Http2Stream {
    explicit Http2Stream(int32_t id) : id(id) {}

    int32_t id;
    // The request head as received: every name and value one after the other
    // in `text` (one buffer per stream, not two strings per field); the views
    // of `headers` and `request` point into it, made once the head is complete.
    struct TextRef {
        uint32_t at = 0, size = 0;
    };
    std::string text;
    TextRef method, path, authority;
    std::vector<std::pair<TextRef, TextRef>> fields;
    std::string cookie; // §8.2.3: cookie fields joined with "; "
    std::vector<Header> headers;

    TextRef keep(std::string_view bytes) {
        if (text.capacity() == 0) text.reserve(512); // most request heads fit
        TextRef ref{uint32_t(text.size()), uint32_t(bytes.size())};
        text.append(bytes);
        return ref;
    }
    std::string_view view(TextRef ref) const { return {text.data() + ref.at, ref.size}; }
    size_t header_bytes = 0;
    bool too_large = false; // over kMaxHeaderList: answered 431
    Request request;
    Exchange exchange;
    bool started = false;       // the router has the exchange (start or fail ran)
    bool request_ended = false; // END_STREAM received
    bool body_ended = false;    // end_body() told to the response stream
    std::string body_pending;   // request body bytes the response stream has not taken
    uint64_t body_received = 0;
    // The answer.
    bool submitted = false; // HEADERS submitted
    bool relaying = false;  // DATA comes from exchange.stream
    bool deferred = false;  // the DATA source waits for the backend
    bool accounted = false;
    int status = 0;
    uint64_t body_sent = 0;
    // Where the payload of the DATA frame read_body announced starts, counted
    // in the body (response.body, then the file range).
    uint64_t frame_at = 0;
};

namespace {

// Fields of a response head that are HTTP/1.1 connection management, never
// sent on HTTP/2 (RFC 9113 §8.2.2).
bool is_connection_field(std::string_view name) {
    for (std::string_view field :
         {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te"})
        if (ascii_iequals(name, field)) return true;
    return false;
}

// Fields lepus writes itself, or that describe the backend's connection
// (the HTTP/1.1 engine drops the same when it relays a stream).
bool is_backend_own_field(std::string_view name) {
    for (std::string_view own : {"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Trailer",
                                 "Upgrade", "Proxy-Connection", "Content-Length", "Date", "Server"})
        if (ascii_iequals(name, own)) return true;
    return false;
}

std::optional<Method> method_of(std::string_view text) {
    for (Method method : {Method::Get, Method::Head, Method::Post, Method::Options, Method::Put,
                          Method::Delete, Method::Patch, Method::Trace, Method::Connect})
        if (text == method_name(method)) return method;
    return std::nullopt;
}

// RFC 9110 §6.4.1: no content for HEAD, 1xx, 204 and 304.
bool has_no_body(const Request& request, int status) {
    return request.is_head() || status < 200 || status == 204 || status == 304;
}

// The handlers' HTTP/1.1 head text ("HTTP/1.1 200 OK\r\nName: value\r\n...")
// as an HTTP/2 header block: ":status" first, names lowercased (§8.2.1). The
// fields point into `text`, a copy of the head lowercased in place with the
// status digits after it: one buffer, no allocation per field once the
// scratch space has grown (nghttp2_submit_response copies the block).
void head_to_fields(int status, std::string_view head, std::string& text,
                    std::vector<nghttp2_nv>& fields) {
    static char status_name[] = ":status";
    char digits[8];
    size_t digits_size = std::to_chars(digits, digits + sizeof digits, status).ptr - digits;
    text.assign(head);
    text.append(digits, digits_size);
    auto field = [](char* name, size_t name_size, char* value, size_t value_size) {
        return nghttp2_nv{reinterpret_cast<uint8_t*>(name), reinterpret_cast<uint8_t*>(value),
                          name_size, value_size, NGHTTP2_NV_FLAG_NONE};
    };
    fields.clear();
    fields.push_back(
        field(status_name, sizeof status_name - 1, text.data() + head.size(), digits_size));
    char* base = text.data();
    std::string_view rest(base, head.size());
    size_t at = rest.find("\r\n");
    while (at != std::string_view::npos && at + 2 < rest.size()) {
        at += 2;
        size_t end = rest.find("\r\n", at);
        if (end == std::string_view::npos || end == at) break;
        std::string_view line = rest.substr(at, end - at);
        size_t line_at = at;
        at = end;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        if (is_connection_field(line.substr(0, colon))) continue;
        for (size_t i = 0; i < colon; ++i)
            base[line_at + i] = ascii_lower(base[line_at + i]);
        std::string_view value = trim_ows(line.substr(colon + 1));
        fields.push_back(
            field(base + line_at, colon, base + (value.data() - rest.data()), value.size()));
    }
}

} // namespace

// Scratch space reused for every response's header block.
struct Http2Engine::HeadFields {
    std::string text;
    std::vector<nghttp2_nv> fields;

    const std::vector<nghttp2_nv>& build(int status, std::string_view head) {
        head_to_fields(status, head, text, fields);
        return fields;
    }
};

// nghttp2's callbacks, with access to the engine.
struct Http2Callbacks {
    static Http2Engine& engine(void* user_data) { return *static_cast<Http2Engine*>(user_data); }

    static Http2Stream* find(Http2Engine& self, int32_t id) {
        auto it = self.streams_.find(id);
        return it == self.streams_.end() ? nullptr : it->second.get();
    }

    // Frames on streams that are over. With RFC 9218 priorities nghttp2 keeps
    // no closed stream, and it ignores frames for streams it does not know;
    // the RFC wants errors: a HEADERS frame opening a stream below one already
    // used is a PROTOCOL_ERROR (§5.1.1), HEADERS or DATA on a stream the client
    // closed or reset is a STREAM_CLOSED one (§5.1). Frames that cross a
    // RST_STREAM of ours are ignored, as §5.4.2 allows.
    static int on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd,
                              void* user_data) {
        Http2Engine& self = engine(user_data);
        int32_t id = hd->stream_id;
        if (id == 0 || id % 2 == 0 || (hd->type != NGHTTP2_HEADERS && hd->type != NGHTTP2_DATA))
            return 0;
        if (id > self.highest_stream_id_) {
            if (hd->type == NGHTTP2_HEADERS) self.highest_stream_id_ = id;
            return 0; // a new stream (DATA on an idle one is nghttp2's error)
        }
        if (nghttp2_session_find_stream(session, id) || self.reset_by_us(id)) return 0;
        bool lower_new_stream = hd->type == NGHTTP2_HEADERS && id < self.highest_stream_id_;
        nghttp2_session_terminate_session(session, lower_new_stream ? NGHTTP2_PROTOCOL_ERROR
                                                                    : NGHTTP2_STREAM_CLOSED);
        return 0;
    }

    static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
        Http2Engine& self = engine(user_data);
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
            return 0;
        self.streams_.emplace(frame->hd.stream_id,
                              std::make_unique<Http2Stream>(frame->hd.stream_id));
        if (self.gauges_) {
            self.gauges_->streams.fetch_add(1, std::memory_order_relaxed);
            self.gauges_->streams_total.fetch_add(1, std::memory_order_relaxed);
        }
        return 0;
    }

    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_bytes,
                         size_t name_length, const uint8_t* value_bytes, size_t value_length,
                         uint8_t, void* user_data) {
        Http2Engine& self = engine(user_data);
        Http2Stream* stream = find(self, frame->hd.stream_id);
        if (!stream || stream->started) return 0; // trailers: not used
        // As SETTINGS_MAX_HEADER_LIST_SIZE counts (RFC 9113 §6.5.2): past the
        // limit the fields are dropped and the request answered 431.
        stream->header_bytes += name_length + value_length + 32;
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
        } else if (name == ":scheme") {
            // https or http: the connection says which.
        } else if (name == "cookie") {
            // §8.2.3: split cookies are joined with "; " for an HTTP/1.1 context (CGI).
            if (!stream->cookie.empty()) stream->cookie.append("; ");
            stream->cookie.append(value);
        } else {
            if (stream->fields.empty()) stream->fields.reserve(16);
            auto field = std::pair{stream->keep(name), stream->keep(value)};
            if (name == "host" && stream->authority.size == 0) stream->authority = field.second;
            stream->fields.push_back(field);
        }
        return 0;
    }

    static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
        Http2Engine& self = engine(user_data);
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

    static int on_data_chunk_recv(nghttp2_session* session, uint8_t, int32_t stream_id,
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

    static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
        Http2Engine& self = engine(user_data);
        auto it = self.streams_.find(stream_id);
        if (it == self.streams_.end()) return 0;
        self.finish_stream(*it->second);
        self.streams_.erase(it);
        return 0;
    }

    // DATA for a response: from the complete Response's memory and file, or
    // from the response stream as the backend delivers.
    static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buffer, size_t length,
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
    static int send_data(nghttp2_session*, nghttp2_frame*, const uint8_t* header, size_t length,
                         nghttp2_data_source* source, void* user_data) {
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
        // The frame never was: nghttp2 resets the stream.
        self.recent_resets_[self.next_reset_++ % self.recent_resets_.size()] = stream.id;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }

    // A payload from memory. The contents of a cached file (a small static
    // file) stay where they are, a segment of the output, on either transport
    // (writev takes them as they are, TLS included); anything else (a
    // generated page in owned_body) lives no longer than the Response, which
    // may go before the frame is written, so it is copied now.
    static void send_memory_data(Http2Output& output, std::string_view header,
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
    static int send_file_data(Http2Engine& self, std::string_view header, const Response& response,
                              uint64_t file_at, size_t length) {
        if (self.context_.options.h2c_sendfile && self.transport_.zero_copy_files() &&
            response.file) {
            self.output_.append_file(header, response.file, response.file_fd, file_at, length);
            return 0;
        }
        return self.output_.append_file_copy(header, response.file_fd, file_at, length);
    }
};

Http2Engine::Http2Engine(const Http1Context& context, Transport& transport, ConnectionInfo& info,
                         ExchangeListener& listener, std::string_view received, Http2Gauges* gauges)
    : context_(context), transport_(transport), info_(info), listener_(listener), gauges_(gauges),
      input_(received), head_fields_(std::make_unique<HeadFields>()),
      last_activity_ms_(context.clock.now_ms), last_write_ms_(context.clock.now_ms) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks,
                                                          Http2Callbacks::on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                            Http2Callbacks::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, Http2Callbacks::on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Http2Callbacks::on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                              Http2Callbacks::on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                           Http2Callbacks::on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(callbacks, Http2Callbacks::send_data);
    nghttp2_option* option = nullptr;
    nghttp2_option_new(&option);
    // Request body windows open as the backend takes the bytes (offer_body).
    nghttp2_option_set_no_auto_window_update(option, 1);
    // CVE-2023-44487 (rapid reset): past a burst of 1000 resets, 33 a second.
    nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33);
    // CVE-2024-27316: a header block in at most 8 CONTINUATION frames.
    nghttp2_option_set_max_continuations(option, 8);
    // PING and SETTINGS floods: ACKs queued for a peer that does not read.
    nghttp2_option_set_max_outbound_ack(option, 1000);
    nghttp2_option_set_max_settings(option, 32);
    nghttp2_session_server_new2(&session_, callbacks, this, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 256 * 1024},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderList},
        // RFC 9218: streams are scheduled by the `priority` header field's
        // urgency (and incremental flag), not RFC 7540's tree, which §2.1 of
        // RFC 9113 deprecated: CSS and scripts (u=0..2) before images (u=5).
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    // The connection's window: room for several streams' bodies at once.
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 20);
    if (gauges_) {
        gauges_->connections.fetch_add(1, std::memory_order_relaxed);
        gauges_->connections_total.fetch_add(1, std::memory_order_relaxed);
    }
    plan_deadline();
}

Http2Engine::~Http2Engine() {
    close();
}

Http2Engine::Next Http2Engine::drive() {
    if (closed_) return Next::Close;
    if (lingering_) return linger();
    bool open = read_input();
    poll_streams();
    if (!write_output() || !open) return Next::Close;
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_) &&
        output_.empty())
        return start_lingering(); // GOAWAY exchanged and every stream done
    if (draining_ && streams_.empty() && output_.empty()) return start_lingering();
    plan_deadline();
    return readable_ ? Next::Yield : Next::Wait;
}

// An orderly close: our FIN first, then what the client still sends (a PING
// after its GOAWAY) is read and dropped until its own FIN or linger_ms, as the
// HTTP/1.1 engine lingers. Closing with unread bytes makes Linux answer with
// RST instead of FIN, and a PING that arrives a moment after the GOAWAY would
// then reset the connection under our last frames (h2spec's GOAWAY case saw
// that). Bounded: a client that keeps sending is closed at the deadline.
Http2Engine::Next Http2Engine::start_lingering() {
    transport_.shutdown_write();
    lingering_ = true;
    deadline_ = context_.clock.now_ms + context_.options.linger_ms;
    return linger();
}

Http2Engine::Next Http2Engine::linger() {
    ssize_t drained = drain_input(transport_, kMaxReadPerPass);
    if (drained == kIoAgain) return Next::Wait;
    return drained == 0 ? Next::Close : Next::Yield; // the client's FIN, or a broken socket
}

bool Http2Engine::read_input() {
    if (!input_.empty()) {
        bool fed = feed(input_.data(), input_.size());
        std::string().swap(input_);
        if (!fed) return false;
    }
    char buffer[16384];
    size_t total = 0;
    while (readable_ && total < kMaxReadPerPass) {
        ssize_t n = transport_.read(buffer, sizeof buffer);
        if (n == kIoAgain) {
            readable_ = false;
            break;
        }
        if (n <= 0) {
            // The client closed or broke the connection: nothing more to answer.
            peer_closed_ = true;
            return false;
        }
        total += size_t(n);
        last_activity_ms_ = context_.clock.now_ms;
        // A short read drained the socket (Transport's contract): the next
        // arrival raises a new edge, so no read that would only say EAGAIN
        // (but a FIN seen with the data must still be read).
        if (size_t(n) < sizeof buffer && !peer_shut_) readable_ = false;
        if (!feed(buffer, size_t(n))) return false;
    }
    return true;
}

// Hands bytes to nghttp2 a frame at a time, looking at each frame's header
// before nghttp2 sees it: with RFC 9218 priorities nghttp2 keeps no closed
// stream and ignores DATA for a stream it does not know, where RFC 9113 §5.1
// makes DATA on a stream the client closed or reset a STREAM_CLOSED error.
bool Http2Engine::feed(const char* data, size_t size) {
    while (size > 0) {
        size_t chunk = size;
        if (preface_left_ > 0) {
            chunk = std::min(size, preface_left_);
            preface_left_ -= chunk;
        } else if (frame_left_ > 0) {
            chunk = size_t(std::min<uint64_t>(size, frame_left_));
            if (priority_have_ < priority_.size() && priority_stream_ != 0) {
                size_t take = std::min(chunk, priority_.size() - priority_have_);
                std::memcpy(priority_.data() + priority_have_, data, take);
                priority_have_ += take;
                chunk = take;
                if (priority_have_ == priority_.size()) check_priority();
            }
            frame_left_ -= chunk;
        } else {
            chunk = std::min(size, frame_header_.size() - header_have_);
            std::memcpy(frame_header_.data() + header_have_, data, chunk);
            header_have_ += chunk;
            if (header_have_ == frame_header_.size()) {
                header_have_ = 0;
                const auto* h = reinterpret_cast<const uint8_t*>(frame_header_.data());
                frame_left_ = uint32_t(h[0]) << 16 | uint32_t(h[1]) << 8 | h[2];
                auto id = int32_t((uint32_t(h[5] & 0x7f) << 24) | uint32_t(h[6]) << 16 |
                                  uint32_t(h[7]) << 8 | h[8]);
                if (h[3] == NGHTTP2_DATA && id % 2 == 1 && id <= highest_stream_id_ &&
                    !nghttp2_session_find_stream(session_, id) && !reset_by_us(id))
                    nghttp2_session_terminate_session(session_, NGHTTP2_STREAM_CLOSED);
                // PRIORITY frames are ignored under RFC 9218 (nghttp2 skips them
                // whole), but RFC 9113 §6.3 still has two errors for them.
                priority_stream_ = 0;
                if (h[3] == NGHTTP2_PRIORITY && id == 0)
                    nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
                else if (h[3] == NGHTTP2_PRIORITY && frame_left_ == priority_.size())
                    priority_stream_ = id, priority_have_ = 0;
            }
        }
        ssize_t used =
            nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), chunk);
        if (used < 0) {
            log_info("client %s: HTTP/2: %s", info_.peer.to_string().c_str(),
                     nghttp2_strerror(int(used)));
            return false;
        }
        data += chunk;
        size -= chunk;
    }
    return true;
}

bool Http2Engine::write_output() {
    if (output_broken_) return false;
    for (;;) {
        if (output_.empty()) {
            // Frames from nghttp2, gathered into one batch of up to 64 KiB
            // (file payloads counted, whether copied or left in the file).
            while (output_.pending() < uint64_t{64} * 1024) {
                const uint8_t* data = nullptr;
                ssize_t n = nghttp2_session_mem_send(session_, &data);
                if (n < 0) return false;
                if (n == 0) break;
                output_.append({reinterpret_cast<const char*>(data), size_t(n)});
            }
            if (output_.empty()) {
                write_blocked_ = false;
                // An idle connection keeps no output buffer (up to 64 KiB).
                if (streams_.empty()) output_.release();
                return true;
            }
        }
        uint64_t before = output_.pending();
        Http2Output::Status status = output_.write(transport_);
        if (output_.pending() < before) last_activity_ms_ = last_write_ms_ = context_.clock.now_ms;
        switch (status) {
        case Http2Output::Status::Done:
            continue;
        case Http2Output::Status::Again:
            write_blocked_ = true;
            return true;
        case Http2Output::Status::Error:
            return false;
        case Http2Output::Status::FileEnded:
            // Part of a DATA frame is out and the rest cannot come: no frame
            // (not even GOAWAY) can follow it, only the end of the connection.
            report_internal_error("sendfile for an HTTP/2 response", output_.failed_path(),
                                  output_.file_error());
            output_broken_ = true;
            output_.release();
            return false;
        }
    }
}

void Http2Engine::start_exchange(Http2Stream& stream) {
    stream.started = true;
    ++requests_;
    Request& request = stream.request;
    if (!stream.cookie.empty())
        stream.fields.emplace_back(stream.keep("cookie"), stream.keep(stream.cookie));
    // `text` is complete (trailers are not kept): views into it hold from here.
    std::string_view method_text = stream.view(stream.method);
    request.method_text = method_text;
    request.target = stream.view(stream.path);
    std::string_view target = request.target;
    size_t mark = target.find('?');
    request.path = target.substr(0, mark);
    request.query = mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
    request.version_minor = 1; // HTTP/1.1 semantics for the handlers
    request.host = stream.view(stream.authority);
    request.keep_alive = true;
    stream.headers.clear();
    stream.headers.reserve(stream.fields.size());
    for (const auto& [name_ref, value_ref] : stream.fields) {
        std::string_view n = stream.view(name_ref);
        std::string_view value = stream.view(value_ref);
        stream.headers.push_back({n, value});
        if (n == "content-length") {
            uint64_t length = 0;
            if (std::from_chars(value.data(), value.data() + value.size(), length).ec ==
                std::errc())
                request.content_length = length;
        } else if (n == "if-none-match") {
            request.if_none_match = value;
        } else if (n == "if-modified-since") {
            request.if_modified_since = value;
        } else if (n == "if-match") {
            request.if_match = value;
        } else if (n == "if-unmodified-since") {
            request.if_unmodified_since = value;
        } else if (n == "range") {
            request.range = value;
        } else if (n == "if-range") {
            request.if_range = value;
        } else if (n == "accept-encoding") {
            request.accept_encoding = value;
        } else if (n == "referer") {
            request.referer = value;
        } else if (n == "user-agent") {
            request.user_agent = value;
        } else if (n == "content-type") {
            request.content_type = value;
        }
    }
    request.headers = stream.headers;
    // A body of unknown length is "chunked" to the handlers (FastCGI
    // gathers it to give php-fpm a CONTENT_LENGTH).
    if (stream.request_ended)
        request.content_length.reset();
    else if (!request.content_length)
        request.chunked = true;
    Exchange& exchange = stream.exchange;
    exchange.request = &request;
    exchange.connection = &info_;
    exchange.listener = &listener_;
    exchange.protocol = "HTTP/2.0";
    exchange.now_s = context_.clock.now_s;
    exchange.now_ms = context_.clock.now_ms;
    exchange.keep_alive = true;
    std::optional<Method> method = method_of(method_text);
    if (stream.too_large) return fail_exchange(stream, 431);
    if (!method) return fail_exchange(stream, 501);
    request.method = *method;
    if (request.content_length && *request.content_length > context_.options.max_body_size)
        return fail_exchange(stream, 413);
    context_.handler.start(exchange);
    if (!exchange.stream) return submit_response(stream);
    offer_body(stream);
}

void Http2Engine::offer_body(Http2Stream& stream) {
    ResponseStream* backend = stream.exchange.stream.get();
    if (!backend || stream.body_ended) return;
    if (!stream.body_pending.empty()) {
        size_t taken = backend->offer_body(stream.body_pending);
        if (taken > 0) {
            stream.body_pending.erase(0, taken);
            nghttp2_session_consume(session_, stream.id, taken);
        }
    }
    if (stream.request_ended && stream.body_pending.empty()) {
        stream.body_ended = true;
        backend->end_body();
    }
}

void Http2Engine::poll_streams() {
    for (auto& [id, owned] : streams_) {
        Http2Stream& stream = *owned;
        if (!stream.started || !stream.exchange.stream) continue;
        ResponseStream& backend = *stream.exchange.stream;
        StreamState state = backend.poll();
        offer_body(stream);
        if (state == StreamState::Pending) continue;
        if (!stream.submitted) {
            if (state == StreamState::Ready)
                submit_stream_head(stream);
            else
                fail_exchange(stream, backend.error_status(), std::string(backend.error_headers()));
            continue;
        }
        if (state == StreamState::Failed || state == StreamState::Broken) {
            // Part of the answer is out: the stream is reset, never completed wrongly.
            reset_stream(id, NGHTTP2_INTERNAL_ERROR);
            continue;
        }
        if (stream.deferred && (!backend.body().empty() || backend.ended())) {
            stream.deferred = false;
            nghttp2_session_resume_data(session_, id);
        }
    }
}

// RFC 9113 §5.3.1: a stream cannot depend on itself (a stream error).
void Http2Engine::check_priority() {
    const auto* p = reinterpret_cast<const uint8_t*>(priority_.data());
    auto dependency =
        int32_t((uint32_t(p[0] & 0x7f) << 24) | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]);
    if (dependency == priority_stream_) {
        // A RST_STREAM cannot name an idle stream (§5.1): then the whole connection.
        if (nghttp2_session_find_stream(session_, priority_stream_))
            reset_stream(priority_stream_, NGHTTP2_PROTOCOL_ERROR);
        else
            nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    }
    priority_stream_ = 0;
}

void Http2Engine::reset_stream(int32_t id, uint32_t error_code) {
    recent_resets_[next_reset_++ % recent_resets_.size()] = id;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, error_code);
}

bool Http2Engine::reset_by_us(int32_t id) const {
    return std::find(recent_resets_.begin(), recent_resets_.end(), id) != recent_resets_.end();
}

void Http2Engine::submit_response(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    const Response& response = exchange.response;
    stream.status = response.status;
    const std::vector<nghttp2_nv>& nva = head_fields_->build(response.status, response.head);
    stream.submitted = true;
    stream.accounted = true;
    context_.handler.account(exchange, response.status, response.body_bytes());
    nghttp2_data_provider provider{};
    provider.source.ptr = &stream;
    provider.read_callback = Http2Callbacks::read_body;
    bool body = response.body_bytes() > 0 && !has_no_body(*exchange.request, response.status);
    nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(),
                            body ? &provider : nullptr);
}

void Http2Engine::submit_stream_head(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    const Request& request = *exchange.request;
    ResponseStream& backend = *exchange.stream;
    const StreamHead& head = backend.head();
    int status = exchange.stream_status ? exchange.stream_status : head.status;
    if (head.status < 200 || head.status > 599) {
        log_error("the backend of \"%.*s\" answered status %d: 502", int(request.target.size()),
                  request.target.data(), head.status);
        return fail_exchange(stream, 502);
    }
    bool no_body = has_no_body(request, status);
    std::optional<uint64_t> length = head.content_length;
    if (length && backend.ended() && backend.body().size() < *length && !no_body) {
        log_error("the backend's response to \"%.*s\" ended short of its Content-Length: 502",
                  int(request.target.size()), request.target.data());
        return fail_exchange(stream, 502);
    }
    if (!length && backend.ended() && !request.is_head()) length = backend.body().size();
    Response& response = exchange.response;
    response.reset();
    begin_head(status, context_.clock.now_s, response);
    for (const Header& header : head.headers) {
        if (is_backend_own_field(header.name)) continue;
        response.head.append(header.name).append(": ").append(header.value).append("\r\n");
    }
    response.head.append(exchange.stream_headers);
    if (length && status != 204 && status != 304) {
        response.head.append("Content-Length: ");
        append_decimal(*length, response.head);
        response.head.append("\r\n");
    }
    response.head.append("\r\n");
    stream.status = status;
    const std::vector<nghttp2_nv>& nva = head_fields_->build(status, response.head);
    stream.submitted = true;
    if (no_body) {
        // The backend's body (if any) drains into its pool when the stream is let go.
        stream.accounted = true;
        context_.handler.account(exchange, status, 0);
        nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(), nullptr);
        return;
    }
    stream.relaying = true;
    nghttp2_data_provider provider{};
    provider.source.ptr = &stream;
    provider.read_callback = Http2Callbacks::read_body;
    nghttp2_submit_response(session_, stream.id, nva.data(), nva.size(), &provider);
}

void Http2Engine::fail_exchange(Http2Stream& stream, int status, std::string_view extra_headers) {
    Exchange& exchange = stream.exchange;
    std::string extra(extra_headers); // the lines may live in the stream let go here
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    stream.started = true;
    stream.body_ended = true; // nobody reads the rest of the body
    if (!stream.body_pending.empty()) {
        nghttp2_session_consume(session_, stream.id, stream.body_pending.size());
        std::string().swap(stream.body_pending);
    }
    exchange.response.reset();
    context_.handler.fail(exchange, status, extra);
    if (exchange.stream) {
        // An error page run by a script: relayed like any stream.
        stream.body_ended = false;
        stream.request_ended = true;
        offer_body(stream);
        return;
    }
    submit_response(stream);
}

void Http2Engine::finish_stream(Http2Stream& stream) {
    Exchange& exchange = stream.exchange;
    if (stream.started) {
        // The client reset the stream (or the connection went) before the end: 499, as nginx.
        if (!stream.accounted) context_.handler.account(exchange, 499, stream.body_sent);
        if (exchange.stream) {
            exchange.stream->release();
            exchange.stream.reset();
        }
        context_.handler.finish(exchange);
    }
    if (gauges_) gauges_->streams.fetch_sub(1, std::memory_order_relaxed);
}

void Http2Engine::plan_deadline() {
    const Http1Options& options = context_.options;
    // Output that cannot leave: the socket is full, or a response waits for
    // the client's flow-control window (a peer that never opens it is closed
    // at the send timeout, as one that never reads).
    bool stalled =
        write_blocked_ || std::any_of(streams_.begin(), streams_.end(), [](const auto& entry) {
            return entry.second->submitted && !entry.second->deferred;
        });
    // The clock starts when output began to wait, or at the last byte out.
    if (stalled && !stalled_) last_write_ms_ = std::max(last_write_ms_, context_.clock.now_ms);
    stalled_ = stalled;
    if (stalled)
        deadline_ = last_write_ms_ + options.send_timeout_ms;
    else if (streams_.empty())
        // The preface and first request under the header deadline, then idle.
        deadline_ = last_activity_ms_ +
                    (requests_ == 0 ? options.header_timeout_ms : options.keepalive_timeout_ms);
    else
        deadline_ = 0; // streams wait on their backends, which have their own timeouts
}

Http2Engine::Next Http2Engine::on_deadline() {
    if (deadline_ == 0 || context_.clock.now_ms < deadline_) return Next::Wait;
    if (lingering_) return Next::Close;
    // Idle: a GOAWAY says so (RFC 9113 §6.8), if the socket takes it.
    if (!write_blocked_) {
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        write_output();
    }
    return Next::Close;
}

bool Http2Engine::on_shutdown() {
    if (closed_ || lingering_) return true;
    draining_ = true;
    // GOAWAY with the last stream taken: those in flight finish (RFC 9113 §6.8).
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    write_output();
    return streams_.empty();
}

void Http2Engine::close() {
    if (closed_) return;
    closed_ = true;
    for (auto& [id, stream] : streams_)
        finish_stream(*stream);
    streams_.clear();
    output_.release(); // the files of segments not sent close now
    nghttp2_session_del(session_);
    session_ = nullptr;
    if (gauges_) gauges_->connections.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace lepus
