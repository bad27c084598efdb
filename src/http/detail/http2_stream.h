// Internal header of the HTTP/2 engine (http2_engine.cc, http2_callbacks.cc,
// http2_stream.cc, http2_deadline.cc): one stream's state. Not for other users.
#pragma once

#include "http/detail/http2_head.h"
#include "http/exchange.h"
#include "http/min_rate.h"
#include "http/request.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lepus {

// One stream: its request as received, its Exchange, and how its answer goes out.
struct Http2Stream {
    explicit Http2Stream(int32_t id) : id(id) {}

    // The request head is complete (`text` holds all of it; trailers are not
    // kept): fills `request` and `headers` with views into `text`. 0, or the
    // status to answer instead of starting the exchange: 400 for a malformed
    // host (as HTTP/1.1 answers one) or a method that is no token.
    int complete_request();

    int32_t id;
    // The request head as received: every name and value one after the other
    // in `text` (one buffer per stream, not two strings per field); the views
    // of `headers` and `request` point into it, made once the head is complete.
    struct TextRef {
        uint32_t at = 0, size = 0;
    };
    std::string text;
    TextRef method, path, authority;
    bool has_authority = false; // an empty :authority is still one
    TextRef host_field;         // the first "host" field
    int host_fields = 0;
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
    // An RST_STREAM is queued for it (a stream error nghttp2 found, or one of
    // ours): it is over, and never polled again, so that its answer opens no
    // backend connection (MadeYouReset, CVE-2025-8671: HEADERS then a
    // window overflow in one read).
    bool reset_queued = false;
    std::string body_pending; // request body bytes the response stream has not taken
    uint64_t body_received = 0;
    // When the head or the last body bytes came: a stream whose response
    // stream takes the body and that sends none for --body-timeout is reset.
    uint64_t body_active_ms = 0;
    // A body that holds a backend connection (Exchange::body_holds_backend)
    // must keep up --min-body-rate over each body timeout it is waited for.
    MinRate body_rate;
    // The answer.
    bool submitted = false; // HEADERS submitted
    // The response header block's lowercased names, date and digits, which
    // nghttp2 reads when it packs the HEADERS (detail::head_to_fields).
    detail::HeadText head_text;
    bool relaying = false; // DATA comes from exchange.stream
    bool deferred = false; // the DATA source waits for the backend
    bool accounted = false;
    int status = 0;
    uint64_t body_sent = 0;
    // Bytes the stream holds from its HEADERS on until it closes (its request
    // head, its response head and generated body), counted in the
    // connection's Http2Engine::held_bytes_ since then; see held_now().
    uint64_t held = 0;
    uint64_t held_now() const {
        return text.capacity() + cookie.capacity() +
               fields.capacity() * sizeof(decltype(fields)::value_type) +
               headers.capacity() * sizeof(Header) + exchange.response.head.capacity() +
               exchange.response.owned_body.capacity() + head_text.capacity();
    }
    // Where the payload of the DATA frame read_body announced starts, counted
    // in the body (response.body, then the file range).
    uint64_t frame_at = 0;
};

// Ends a started stream's exchange, over HTTP/2 and HTTP/3 alike: a stream the
// client reset (or whose connection went) before its end is counted 499, as
// nginx; its answer is released and the handler lets go of the exchange.
inline void end_stream_exchange(ExchangeHandler& handler, Http2Stream& stream) {
    if (!stream.started) return;
    Exchange& exchange = stream.exchange;
    if (!stream.accounted) handler.account(exchange, 499, stream.body_sent);
    if (exchange.stream) {
        exchange.stream->release();
        exchange.stream.reset();
    }
    handler.finish(exchange);
}

} // namespace lepus
