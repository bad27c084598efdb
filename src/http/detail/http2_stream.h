// Internal header of the HTTP/2 engine (http2_engine.cc, http2_receive.cc,
// http2_send.cc, http2_stream.cc, http2_deadline.cc): one stream's state. Not
// for other users.
#pragma once

#include "http/detail/hpack_table.h"
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

    // One field of the request head, as HPACK decoded it: kept, or false
    // when it makes the request malformed (RFC 9113 §8.2.1, §8.2.2, §8.3.1:
    // a name not in lowercase token characters, a value with NUL, CR, LF or
    // space at either end, a connection field, TE other than "trailers",
    // pseudo-fields unknown, repeated or after a regular field).
    // `static_name`: the name's index in HPACK's static table (0: none).
    bool add_field(std::string_view name, std::string_view value, uint8_t static_name = 0);
    // After the block: whether the pseudo-fields a request needs are there
    // (§8.3.1: :method, :scheme and a non-empty :path; CONNECT: :authority only).
    bool head_complete() const;
    // A trailer field: no pseudo-field, checked as add_field checks names and values.
    static bool valid_trailer(std::string_view name, std::string_view value);

    int32_t id;
    // The request head as received: every name and value one after the other
    // in `text` (one buffer per stream, not two strings per field); the views
    // of `headers` and `request` point into it, made once the head is complete.
    struct TextRef {
        uint32_t at = 0, size = 0;
    };
    // add_field for a field already in `text`: `value_ref` (and `name_ref`,
    // unless the name is static or a pseudo-field's) where it lies there.
    bool add_field(std::string_view name, std::string_view value, uint8_t static_name,
                   TextRef name_ref, TextRef value_ref);
    std::string text;
    TextRef method, path, authority;
    bool has_authority = false; // an empty :authority is still one
    bool has_method = false, has_scheme = false, has_path = false;
    bool regular_seen = false; // a regular field came: no pseudo-field may follow
    // RFC 9218 §4: the `priority` field's urgency (0 first .. 7) and incremental flag.
    uint8_t urgency = 3;
    bool incremental = false;
    TextRef host_field; // the first "host" field
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
    // A name from HPACK's static table is not copied: its TextRef::at is
    // kStaticName | its index (RFC 7541 Appendix A).
    static constexpr uint32_t kStaticName = 0x80000000;
    std::string_view view(TextRef ref) const {
        if (ref.at & kStaticName) return detail::kHpackStaticTable[ref.at & 0xff].name;
        return {text.data() + ref.at, ref.size};
    }
    size_t header_bytes = 0;
    bool too_large = false; // over kMaxHeaderList: answered 431
    Request request;
    Exchange exchange;
    bool started = false;       // the router has the exchange (start or fail ran)
    bool request_ended = false; // END_STREAM received (half-closed remote, §5.1)
    // content-length of the request, checked against its DATA (§8.1.1); -1: none.
    int64_t expected_length = -1;
    // Flow control (§6.9): what DATA we may still send on it (the client's
    // window), what the client may still send, and what it sent that we have
    // not yet given back with WINDOW_UPDATE.
    int64_t send_window = 0;
    int64_t receive_window = 0;
    uint32_t receive_unacked = 0;
    // Closed (both sides ended, or reset): removed from the engine's table
    // at its next sweep; frames on it are a closed stream's.
    bool closed = false;
    bool body_ended = false; // end_body() told to the response stream
    // An RST_STREAM is queued for it (a stream error, or one of ours): it is over, and never polled
    // again, so that its answer opens no backend connection (MadeYouReset, CVE-2025-8671: HEADERS
    // then a window overflow in one read).
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
    bool submitted = false;       // HEADERS submitted
    bool head_pending = false;    // submitted, not yet in the output (Http2Engine::produce)
    bool has_body = false;        // DATA follows the HEADERS
    bool end_stream_sent = false; // half-closed local (§5.1)
    // The response header block's lowercased names, date and digits, which
    // the HEADERS are encoded from (detail::head_to_fields).
    detail::HeadText head_text;
    bool relaying = false; // DATA comes from exchange.stream
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
