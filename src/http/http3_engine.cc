#include "http/http3_engine.h"

#include "http/detail/http2_head.h"
#include "http/detail/http2_stream.h"
#include "http/http2_engine.h"
#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <nghttp3/nghttp3.h>
#include <unistd.h>
#include <vector>

namespace lepus {

// One request stream: the request model HTTP/2 uses, and what it sent and
// QUIC has not acknowledged yet.
struct Http3Stream {
    explicit Http3Stream(int64_t id) : id(id), h(0) {}

    int64_t id;
    Http2Stream h; // request head, Exchange, request body and answer state
    // Runs of sent body bytes, oldest first; `owned` is null for bytes lent
    // from the response (its memory body lives as long as the exchange).
    struct Sent {
        size_t size;
        std::unique_ptr<uint8_t[]> owned;
    };
    std::deque<Sent> sent;
    uint64_t unacknowledged = 0;
    bool waiting = false; // read_body said WOULDBLOCK: resume on an ACK or progress
    bool body_done = false;
};

// nghttp3 copies the fields when a response is submitted (unlike nghttp2's
// NO_COPY fields), so one scratch block serves every stream of the connection.
struct Http3Engine::HeadFields {
    detail::HeadText text;
    std::vector<detail::HeadField> fields;
    std::vector<nghttp3_nv> out;

    const std::vector<nghttp3_nv>& build(const ResponseHead& head, time_t now) {
        detail::head_to_fields(head, now, text, fields);
        out.clear();
        for (const detail::HeadField& field : fields)
            out.push_back(nghttp3_nv{field.name, field.value, field.namelen, field.valuelen,
                                     NGHTTP3_NV_FLAG_NONE});
        return out;
    }
};

struct Http3Callbacks {
    static Http3Engine& self(void* user_data) { return *static_cast<Http3Engine*>(user_data); }
    static Http3Stream* find(Http3Engine& engine, int64_t id) {
        auto it = engine.streams_.find(id);
        return it == engine.streams_.end() ? nullptr : it->second.get();
    }

    static int acked_stream_data(nghttp3_conn*, int64_t id, uint64_t bytes, void* user_data,
                                 void*) {
        Http3Engine& engine = self(user_data);
        Http3Stream* stream = find(engine, id);
        if (!stream) return 0;
        stream->unacknowledged -= std::min(stream->unacknowledged, bytes);
        while (bytes > 0 && !stream->sent.empty()) {
            Http3Stream::Sent& front = stream->sent.front();
            if (front.size > bytes) {
                front.size -= size_t(bytes); // the rest of the run still waits for its ACK
                break;
            }
            bytes -= front.size;
            stream->sent.pop_front();
        }
        if (stream->waiting && stream->unacknowledged < Http3Engine::kMaxUnacknowledged) {
            stream->waiting = false;
            nghttp3_conn_resume_stream(engine.h3_, id);
        }
        return 0;
    }
    static int stream_close(nghttp3_conn*, int64_t id, uint64_t, void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        // A client's request stream (RFC 9000 §2.1: id % 4 == 0), with a
        // complete head or not: the client may open another.
        if (id % 4 == 0) engine.connection_.allow_one_more_stream();
        auto it = engine.streams_.find(id);
        if (it == engine.streams_.end()) return 0;
        engine.finish_stream(*it->second);
        engine.streams_.erase(it);
        return 0;
    }
    static int recv_data(nghttp3_conn*, int64_t id, const uint8_t* data, size_t size,
                         void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        Http3Stream* stream = find(engine, id);
        Http2Stream* h = stream ? &stream->h : nullptr;
        if (!h || !h->exchange.stream) {
            engine.connection_.extend_stream_offset(id, size); // nobody waits for it
            if (h) h->body_received += size;
            return 0;
        }
        h->body_received += size;
        h->body_active_ms = engine.context_.clock.now_ms;
        if (h->body_received > engine.context_.options.max_body_size && !h->submitted) {
            engine.connection_.extend_stream_offset(id, size);
            engine.fail_exchange(*stream, 413);
            return 0;
        }
        h->body_pending.append(reinterpret_cast<const char*>(data), size);
        engine.offer_body(*stream);
        return 0;
    }
    static int deferred_consume(nghttp3_conn*, int64_t id, size_t consumed, void* user_data,
                                void*) {
        self(user_data).connection_.extend_stream_offset(id, consumed);
        return 0;
    }
    static int begin_headers(nghttp3_conn* conn, int64_t id, void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        if (find(engine, id)) return 0;
        auto stream = std::make_unique<Http3Stream>(id);
        nghttp3_conn_set_stream_user_data(conn, id, stream.get());
        engine.streams_.emplace(id, std::move(stream));
        if (engine.gauges_) {
            engine.gauges_->streams.fetch_add(1, std::memory_order_relaxed);
            engine.gauges_->streams_total.fetch_add(1, std::memory_order_relaxed);
        }
        return 0;
    }
    // The same gathering as HTTP/2's (http2_callbacks.cc on_header).
    static int recv_header(nghttp3_conn*, int64_t id, int32_t, nghttp3_rcbuf* name_buffer,
                           nghttp3_rcbuf* value_buffer, uint8_t, void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        Http3Stream* stream = find(engine, id);
        if (!stream) return 0;
        Http2Stream& h = stream->h;
        nghttp3_vec name_vec = nghttp3_rcbuf_get_buf(name_buffer);
        nghttp3_vec value_vec = nghttp3_rcbuf_get_buf(value_buffer);
        std::string_view name(reinterpret_cast<const char*>(name_vec.base), name_vec.len);
        std::string_view value(reinterpret_cast<const char*>(value_vec.base), value_vec.len);
        h.header_bytes += name.size() + value.size() + 32;
        if (h.started) return 0; // trailers: not used
        if (h.header_bytes > Http2Engine::kMaxHeaderList) h.too_large = true;
        if (h.too_large) return 0;
        if (name == ":method") {
            h.method = h.keep(value);
        } else if (name == ":path") {
            h.path = h.keep(value);
        } else if (name == ":authority") {
            h.authority = h.keep(value);
            h.has_authority = true;
        } else if (name == ":scheme") {
        } else if (name == "cookie") {
            if (!h.cookie.empty()) h.cookie.append("; ");
            h.cookie.append(value);
        } else {
            if (h.fields.empty()) h.fields.reserve(16);
            auto field = std::pair{h.keep(name), h.keep(value)};
            if (name == "host" && h.host_fields++ == 0) h.host_field = field.second;
            h.fields.push_back(field);
        }
        return 0;
    }
    static int end_headers(nghttp3_conn*, int64_t id, int fin, void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        Http3Stream* stream = find(engine, id);
        if (!stream) return 0;
        if (fin) stream->h.request_ended = true;
        if (!stream->h.started) engine.start_exchange(*stream);
        return 0;
    }
    static int end_stream(nghttp3_conn*, int64_t id, void* user_data, void*) {
        Http3Engine& engine = self(user_data);
        Http3Stream* stream = find(engine, id);
        if (!stream) return 0;
        stream->h.request_ended = true;
        engine.offer_body(*stream);
        return 0;
    }
    static int stop_sending(nghttp3_conn*, int64_t id, uint64_t app_error, void* user_data, void*) {
        self(user_data).connection_.shutdown_stream_read(id, app_error);
        return 0;
    }
    static int reset_stream(nghttp3_conn*, int64_t id, uint64_t app_error, void* user_data, void*) {
        self(user_data).connection_.shutdown_stream_write(id, app_error);
        return 0;
    }
    static nghttp3_ssize read_data(nghttp3_conn*, int64_t, nghttp3_vec* vec, size_t count,
                                   uint32_t* flags, void* user_data, void* stream_user_data) {
        return self(user_data).read_body(*static_cast<Http3Stream*>(stream_user_data),
                                         reinterpret_cast<QuicVec*>(vec), count, *flags);
    }
};

Http3Engine::Http3Engine(const Http1Context& context, QuicConnection& connection,
                         Http3Gauges* gauges)
    : context_(context), connection_(connection), gauges_(gauges),
      info_(connection.peer(), connection.fd()), head_fields_(std::make_unique<HeadFields>()) {
    info_.secure = true;
    info_.tls_protocol = "TLSv1.3";
}

Http3Engine::~Http3Engine() {
    close();
}

bool Http3Engine::start() {
    nghttp3_callbacks callbacks{};
    callbacks.acked_stream_data = Http3Callbacks::acked_stream_data;
    callbacks.stream_close = Http3Callbacks::stream_close;
    callbacks.recv_data = Http3Callbacks::recv_data;
    callbacks.deferred_consume = Http3Callbacks::deferred_consume;
    callbacks.begin_headers = Http3Callbacks::begin_headers;
    callbacks.recv_header = Http3Callbacks::recv_header;
    callbacks.end_headers = Http3Callbacks::end_headers;
    callbacks.stop_sending = Http3Callbacks::stop_sending;
    callbacks.end_stream = Http3Callbacks::end_stream;
    callbacks.reset_stream = Http3Callbacks::reset_stream;
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    settings.qpack_max_dtable_capacity = 4096;
    settings.qpack_blocked_streams = 100;
    settings.max_field_section_size = Http2Engine::kMaxHeaderListDecoded;
    if (nghttp3_conn_server_new(&h3_, &callbacks, &settings, nghttp3_mem_default(), this) != 0)
        return false;
    nghttp3_conn_set_max_client_streams_bidi(h3_, connection_.initial_client_streams());
    // RFC 9114 §6.2.1 and RFC 9204 §4.2: a control stream and two QPACK streams of ours.
    if (connection_.max_local_streams_uni() < 3) return false;
    int64_t control, encoder, decoder;
    return connection_.open_uni_stream(control) &&
           nghttp3_conn_bind_control_stream(h3_, control) == 0 &&
           connection_.open_uni_stream(encoder) && connection_.open_uni_stream(decoder) &&
           nghttp3_conn_bind_qpack_streams(h3_, encoder, decoder) == 0;
}

int64_t Http3Engine::receive(int64_t id, const uint8_t* data, size_t size, bool fin) {
    if (!h3_) return int64_t(size);
    nghttp3_ssize consumed = nghttp3_conn_read_stream(h3_, id, data, size, fin);
    if (consumed < 0) {
        log_info("client %s: HTTP/3: %s", info_.peer.to_string().c_str(),
                 nghttp3_strerror(int(consumed)));
        return -1;
    }
    return consumed;
}

int Http3Engine::acknowledged(int64_t id, uint64_t bytes) {
    return h3_ && nghttp3_conn_add_ack_offset(h3_, id, bytes) != 0 ? -1 : 0;
}

int Http3Engine::stream_closed(int64_t id, uint64_t app_error) {
    if (!h3_) return 0;
    int rv = nghttp3_conn_close_stream(h3_, id, app_error);
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
        // A stream nghttp3 never saw (reset before its head).
        if (id % 4 == 0) connection_.allow_one_more_stream();
        return 0;
    }
    return rv == 0 ? 0 : -1;
}

int Http3Engine::stream_reset(int64_t id) {
    return h3_ && nghttp3_conn_shutdown_stream_read(h3_, id) != 0 ? -1 : 0;
}

int Http3Engine::stream_unblocked(int64_t id) {
    return h3_ && nghttp3_conn_unblock_stream(h3_, id) != 0 ? -1 : 0;
}

void Http3Engine::client_streams(uint64_t max) {
    if (h3_) nghttp3_conn_set_max_client_streams_bidi(h3_, max);
}

int64_t Http3Engine::next_data(int64_t& id, bool& fin, QuicVec* vec, size_t count) {
    int fin_flag = 0;
    nghttp3_ssize n =
        nghttp3_conn_writev_stream(h3_, &id, &fin_flag, reinterpret_cast<nghttp3_vec*>(vec), count);
    fin = fin_flag != 0;
    return n;
}

void Http3Engine::stream_blocked(int64_t id) {
    nghttp3_conn_block_stream(h3_, id);
}

void Http3Engine::stream_write_shut(int64_t id) {
    nghttp3_conn_shutdown_stream_write(h3_, id);
}

int Http3Engine::written(int64_t id, size_t bytes) {
    return nghttp3_conn_add_write_offset(h3_, id, bytes) == 0 ? 0 : -1;
}

void Http3Engine::start_exchange(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    h.started = true;
    h.body_active_ms = context_.clock.now_ms;
    Request& request = h.request;
    int refused = h.complete_request();
    request.version_major = 3; // the minor stays 1: see Request::version_minor
    Exchange& exchange = h.exchange;
    exchange.request = &request;
    exchange.connection = &info_;
    exchange.listener = this;
    exchange.client = info_.peer;
    exchange.protocol = protocol_name(request);
    exchange.now_s = context_.clock.now_s;
    exchange.now_ms = context_.clock.now_ms;
    exchange.keep_alive = true;
    if (h.too_large) return fail_exchange(stream, 431);
    if (refused) return fail_exchange(stream, refused);
    if (request.content_length && *request.content_length > context_.options.max_body_size)
        return fail_exchange(stream, 413);
    context_.handler.start(exchange);
    if (!exchange.stream) return submit_response(stream);
    offer_body(stream);
}

bool Http3Engine::offer_body(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    ResponseStream* backend = h.exchange.stream.get();
    if (!backend || h.body_ended) return false;
    bool progress = false;
    if (!h.body_pending.empty()) {
        size_t taken = backend->offer_body(h.body_pending);
        if (taken > 0) {
            h.body_pending.erase(0, taken);
            connection_.extend_stream_offset(stream.id, taken); // the client may send more
            progress = true;
        }
    }
    if (h.request_ended && h.body_pending.empty()) {
        h.body_ended = true;
        backend->end_body();
        progress = true;
    }
    return progress;
}

void Http3Engine::poll() {
    for (auto& [id, owned] : streams_) {
        Http3Stream& stream = *owned;
        Http2Stream& h = stream.h;
        if (!h.started || !h.exchange.stream) continue;
        ResponseStream& backend = *h.exchange.stream;
        StreamState state = backend.poll();
        // As HTTP/2's poll_streams: a body held through a wait (a password
        // check, a rate limit's delay) goes now, and a poll then sends it; a
        // buffered body opens its backend only at its end and acts when polled.
        if (offer_body(stream)) state = backend.poll();
        if (state == StreamState::Pending) continue;
        if (!h.submitted) {
            if (state == StreamState::Ready) {
                submit_stream_head(stream);
            } else if (state == StreamState::Redirect) {
                drop_answer(stream);
                context_.handler.redirect(h.exchange);
                answer_again(stream);
            } else {
                ResponseHead extra;
                for (const Header& field : backend.error_fields())
                    extra.add(field.name, field.value);
                fail_exchange(stream, backend.error_status(), &extra);
            }
            continue;
        }
        if (stream_stopped(state)) {
            // RFC 9114 §8.1: H3_INTERNAL_ERROR (0x102) on a response that cannot complete.
            connection_.shutdown_stream_write(id, 0x102);
            continue;
        }
        if (stream.waiting && (!backend.body().empty() || backend.ended()) &&
            stream.unacknowledged < kMaxUnacknowledged) {
            stream.waiting = false;
            nghttp3_conn_resume_stream(h3_, id);
        }
    }
}

void Http3Engine::submit_response(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    Exchange& exchange = h.exchange;
    const Response& response = exchange.response;
    h.status = response.head.status;
    h.accounted = true;
    context_.handler.account(exchange, response.head.status, response.body_bytes());
    submit(stream, response.body_bytes() > 0 &&
                       !response_has_no_body(*exchange.request, response.head.status));
}

void Http3Engine::submit_stream_head(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    Exchange& exchange = h.exchange;
    const Request& request = *exchange.request;
    ResponseStream& backend = *exchange.stream;
    const StreamHead& head = backend.head();
    int status = exchange.stream_status ? exchange.stream_status : head.status;
    if (head.status < 200 || head.status > 599) return fail_exchange(stream, 502);
    bool no_body = response_has_no_body(request, status);
    std::optional<uint64_t> length = head.content_length;
    if (length && backend.ended() && backend.body().size() < *length && !no_body)
        return fail_exchange(stream, 502);
    if (!length && backend.ended() && !request.is_head()) length = backend.body().size();
    Response& response = exchange.response;
    response.reset();
    begin_head(status, true, response);
    for (const Header& header : head.headers)
        if (!is_backend_own_field(header.name)) response.head.add(header.name, header.value);
    exchange.stream_fields.for_each(
        [&](std::string_view name, std::string_view value) { response.head.add(name, value); });
    if (length && status != 204 && status != 304) response.head.content_length = *length;
    h.status = status;
    if (no_body) {
        h.accounted = true;
        context_.handler.account(exchange, status, 0);
        return submit(stream, false);
    }
    h.relaying = true;
    submit(stream, true);
}

void Http3Engine::submit(Http3Stream& stream, bool with_body) {
    Http2Stream& h = stream.h;
    const std::vector<nghttp3_nv>& fields =
        head_fields_->build(h.exchange.response.head, context_.clock.now_s);
    h.submitted = true;
    nghttp3_data_reader reader{Http3Callbacks::read_data};
    nghttp3_conn_submit_response(h3_, stream.id, fields.data(), fields.size(),
                                 with_body ? &reader : nullptr);
}

int64_t Http3Engine::read_body(Http3Stream& stream, QuicVec* vec, size_t count, uint32_t& flags) {
    Http2Stream& h = stream.h;
    Exchange& exchange = h.exchange;
    if (count == 0) return 0;
    if (stream.unacknowledged >= kMaxUnacknowledged) {
        stream.waiting = true;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    size_t n = 0;
    if (h.relaying) {
        ResponseStream& backend = *exchange.stream;
        std::span<const char> body = backend.body();
        n = std::min(body.size(), kChunk);
        if (n > 0) {
            auto owned = std::make_unique<uint8_t[]>(n);
            std::memcpy(owned.get(), body.data(), n);
            vec[0] = QuicVec{owned.get(), n};
            stream.sent.push_back({n, std::move(owned)});
            backend.consume(n);
        }
        h.body_sent += n;
        if (backend.body().empty() && backend.ended()) {
            flags |= NGHTTP3_DATA_FLAG_EOF;
            h.accounted = true;
            context_.handler.account(exchange, h.status, h.body_sent);
        } else if (n == 0) {
            stream.waiting = true;
            return NGHTTP3_ERR_WOULDBLOCK;
        }
    } else {
        const Response& response = exchange.response;
        uint64_t at = h.body_sent;
        if (at < response.body.size()) {
            // Lent: the memory body lives as long as the exchange.
            n = std::min(response.body.size() - size_t(at), size_t(64 * 1024));
            vec[0] = QuicVec{
                reinterpret_cast<uint8_t*>(const_cast<char*>(response.body.data())) + at, n};
            stream.sent.push_back({n, nullptr});
        } else if (at < response.body_bytes()) {
            n = size_t(std::min<uint64_t>(response.body_bytes() - at, kChunk));
            auto owned = std::make_unique<uint8_t[]>(n);
            uint64_t file_at = response.file_offset + (at - response.body.size());
            ssize_t got = pread(response.file_fd, owned.get(), n, off_t(file_at));
            if (got <= 0) {
                report_internal_error("pread for an HTTP/3 response", exchange.request->path,
                                      got < 0 ? errno : EIO);
                return NGHTTP3_ERR_CALLBACK_FAILURE;
            }
            n = size_t(got);
            vec[0] = QuicVec{owned.get(), n};
            stream.sent.push_back({n, std::move(owned)});
        }
        h.body_sent += n;
        if (h.body_sent >= response.body_bytes()) flags |= NGHTTP3_DATA_FLAG_EOF;
    }
    stream.unacknowledged += n;
    return n > 0 ? 1 : 0;
}

void Http3Engine::fail_exchange(Http3Stream& stream, int status, const ResponseHead* extra) {
    drop_answer(stream);
    context_.handler.fail(stream.h.exchange, status, extra);
    answer_again(stream);
}

void Http3Engine::drop_answer(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    Exchange& exchange = h.exchange;
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    h.started = true;
    h.body_ended = true; // nobody reads the rest of the body
    if (!h.body_pending.empty()) {
        connection_.extend_stream_offset(stream.id, h.body_pending.size());
        std::string().swap(h.body_pending);
    }
    exchange.response.reset();
}

void Http3Engine::answer_again(Http3Stream& stream) {
    Http2Stream& h = stream.h;
    if (h.exchange.stream) {
        h.body_ended = false;
        h.request_ended = true;
        offer_body(stream);
        return;
    }
    submit_response(stream);
}

void Http3Engine::finish_stream(Http3Stream& stream) {
    end_stream_exchange(context_.handler, stream.h);
    if (gauges_) gauges_->streams.fetch_sub(1, std::memory_order_relaxed);
}

void Http3Engine::shutdown() {
    if (h3_) nghttp3_conn_shutdown(h3_); // RFC 9114 §5.2: GOAWAY
}

void Http3Engine::close() {
    if (closed_) return;
    closed_ = true;
    for (auto& [id, stream] : streams_)
        finish_stream(*stream);
    streams_.clear();
    nghttp3_conn_del(h3_);
    h3_ = nullptr;
}

} // namespace lepus
