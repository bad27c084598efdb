// Exchange: one request and its response, the unit a protocol engine hands to
// the layer above and a handler answers. The HTTP/1.1 engine (http1_engine.h)
// makes one per request, the HTTP/2 engine one per stream. Neither
// the router nor a handler knows which engine, or which transport, is below.
//
// A response is either complete when the handler returns (Response: a head, a
// memory body and/or a file range: static files, redirects, the status page,
// errors) or streamed (ResponseStream: FastCGI, an HTTP backend, and the
// filters around them),
// with back-pressure both ways: the engine offers the request body as the
// client sends it and pulls response bytes as the client takes them.
//
// The life of an exchange, as the engine drives it:
//   ExchangeHandler::start     the head is complete: answer, or start a stream
//   ResponseStream::offer_body request body bytes, decoded (no chunk framing)
//   ResponseStream::poll       until its head is ready, then body() / consume()
//   ExchangeHandler::redirect  the stream handed the exchange back before its
//                              head (StreamState::Redirect: X-Accel-Redirect)
//   ExchangeHandler::fail      the engine must answer an error itself (413, a
//                              bad chunked body, a stream that failed before
//                              its head): error pages apply, and may stream
//   ExchangeHandler::account   the answer is decided: count it, log it
//   ExchangeHandler::finish    sent, or the client left: let go
#pragma once

#include "http/request.h"
#include "http/response.h"
#include "net/socket.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lepus {

struct RouteState; // the layer above's (server/route_state.h)

// What a handler may need to know of the connection (CGI variables, the
// access log, access rules).
struct ConnectionInfo {
    ConnectionInfo(const SocketAddress& peer, int fd) : peer(peer), socket_peer(peer), fd(fd) {}

    // The connection's client: the socket's peer, or the source a trusted
    // proxy gave in the PROXY protocol header. Set before the first request,
    // never changed after; what a request's handlers see is Exchange::client.
    SocketAddress peer;
    // Who the connection really comes from (the proxy, when there is one).
    SocketAddress socket_peer;
    int fd = -1;           // for getsockname, once, when a handler asks
    bool secure = false;   // TLS: HTTPS=on for scripts
    bool alpn_h2 = false;  // TLS whose ALPN chose "h2": the client speaks HTTP/2 only
    bool h2c_only = false; // an h2c:// listener: HTTP/2 with prior knowledge only (RFC 9113 §3.3)
    // After the TLS handshake: OpenSSL's static names, for SSL_PROTOCOL and SSL_CIPHER.
    std::string_view tls_protocol, tls_cipher;

    // The local address the client connected to (SERVER_ADDR, SERVER_PORT).
    const SocketAddress& local();

private:
    SocketAddress local_;
    bool have_local_ = false;
};

// The head of a streamed response, as the backend gave it.
struct StreamHead {
    int status = 200;
    // The backend's header fields; the engine drops those that describe the
    // backend's own connection or framing (RFC 9110 §7.6.1).
    std::span<const Header> headers;
    std::optional<uint64_t> content_length;
    // A 101 (Switching Protocols) to a request that asked to upgrade: after
    // the head the connection is a byte tunnel (RFC 9110 §7.8), offer_body()
    // carrying the client's bytes and body() the backend's until ended().
    bool upgrade = false;
};

// Fields of a backend's head that an engine does not relay: those lepus writes
// itself (Content-Length, Date, Server) and those that describe the backend's
// connection, not ours (RFC 9110 §7.6.1: hop-by-hop fields are not forwarded).
bool is_backend_own_field(std::string_view name);

enum class StreamState : uint8_t {
    Pending, // nothing new: the stream calls ExchangeListener::on_exchange_progress later
    Ready,   // head() is valid; body() holds what has arrived
    Failed,  // failed before its head was taken: answer error_status()
    Broken,  // failed after its head was taken: the response cannot be completed
    // Before its head: the layer above answers instead (an internal redirect,
    // a script's X-Accel-Redirect), through ExchangeHandler::redirect.
    Redirect,
};

// The stream gives nothing more of its own: the engine replaces or ends the answer.
inline bool stream_stopped(StreamState state) {
    return state == StreamState::Failed || state == StreamState::Broken ||
           state == StreamState::Redirect;
}

// The field a backend stream's 503 carries when its queue is full (the
// client may try again in a second): ResponseStream::error_fields.
inline constexpr Header kRetryAfter[] = {{"Retry-After", "1"}};

// A response produced over time by a backend. All of its work happens inside
// these calls, made by the engine while the request's views are valid; the
// backend only wakes the engine through the ExchangeListener.
class ResponseStream {
public:
    virtual ~ResponseStream() = default;

    // Request body bytes, decoded; returns how many were taken (fewer: full,
    // offer the rest after the next progress).
    virtual size_t offer_body(std::span<const char> data) = 0;
    // The request body is complete (at once for a request without one).
    virtual void end_body() = 0;
    // Moves the exchange on (sends what is buffered) and says where it stands.
    virtual StreamState poll() = 0;
    // After Ready.
    virtual const StreamHead& head() const = 0;
    // Response body bytes received and not yet consumed.
    virtual std::span<const char> body() const = 0;
    virtual void consume(size_t bytes) = 0;
    // No body bytes will follow what body() holds.
    virtual bool ended() const = 0;
    // After Failed: the status to answer (502, 503, 504) and fields to add
    // (Retry-After).
    virtual int error_status() const = 0;
    virtual std::span<const Header> error_fields() const = 0;
    // The engine is done with the stream (complete, failed, or the client
    // left): the backend connection goes back to its pool or is drained.
    virtual void release() = 0;
};

// Implemented by the connection below the engine: a stream calls it when
// something changed (a backend connection was assigned, bytes arrived, room
// freed up). It may be called from inside the engine's own calls.
class ExchangeListener {
public:
    virtual void on_exchange_progress() = 0;

protected:
    ~ExchangeListener() = default;
};

// The longest refused request line the access log keeps (nginx logs it whole;
// a 2 KiB bound keeps a line of garbage from filling the log).
inline constexpr size_t kLoggedLineMax = 2048;

struct Exchange {
    // The request head; null for a request the parser refused (only finish()
    // then sees the exchange). Valid until finish().
    const Request* request = nullptr;
    ConnectionInfo* connection = nullptr;
    // The client as the access log, REMOTE_ADDR, X-Forwarded-For to a backend
    // and --status-allow see it: the engine sets connection->peer, the router
    // the address a trusted proxy gave in X-Forwarded-For (--real-ip-from).
    // The exchange's own: HTTP/2 streams of one proxy connection may each
    // carry another client.
    SocketAddress client;
    ExchangeListener* listener = nullptr;
    std::string_view protocol; // "HTTP/1.1", for the access log
    // With request == null: the start of the refused request's first line (at
    // most kLoggedLineMax bytes, raw), which the access log prints escaped.
    std::string_view request_line;
    time_t now_s = 0; // the loop's clock when start() runs
    uint64_t now_ms = 0;
    // The engine's decision for the connection; a handler may clear it.
    bool keep_alive = true;
    // The layer above set a stream that takes the request body as it arrives
    // and holds a backend connection meanwhile (request_buffering = false):
    // the engine holds the client to Http1Options::min_body_rate, not only to
    // the body timeout's silence (issue 32).
    bool body_holds_backend = false;

    // A complete answer, or the error answer after fail().
    Response response;
    // Or a streamed one (start() or fail() sets it).
    std::unique_ptr<ResponseStream> stream;
    // Status of a streamed response, when it must not be the backend's: the
    // original status of an error page served by a script.
    int stream_status = 0;
    // Fields the layer above adds to a streamed response's head (for a
    // complete one it adds them to response.head itself).
    ResponseHead stream_fields;

    // What the layer above keeps for this exchange from start() to finish()
    // (its site, where its routing stands: server/route_state.h); engines only
    // carry it. finish() takes it back; an exchange dropped without finish()
    // still frees it (the deleter is the layer above's).
    std::unique_ptr<RouteState, void (*)(RouteState*)> route{nullptr, nullptr};
    // Times the layer above re-routed the exchange (an error page); it stops at one.
    int internal_redirects = 0;
    // The user HTTP basic auth let in (REMOTE_USER, AUTH_TYPE=Basic for a
    // script); empty when the path is not protected. The layer above sets it.
    std::string remote_user;
};

// The layer above the engines: the server's router.
class ExchangeHandler {
public:
    // The head of exchange.request is complete: fill exchange.response, or set
    // exchange.stream.
    virtual void start(Exchange& exchange) = 0;
    // After start(), the engine must answer `status` itself (413, a bad chunked
    // body, a stream that failed before its head): fill exchange.response with
    // the error (the site's error page applies), or set exchange.stream again.
    // `extra`: fields the answer carries (a failed stream's Retry-After), or null.
    virtual void fail(Exchange& exchange, int status, const ResponseHead* extra) = 0;
    // A stream reported Redirect before its head: answer again, as fail() does
    // (a complete response, or another stream), from what the stream left in
    // the layer above's route state.
    virtual void redirect(Exchange& exchange) = 0;
    // The answer is decided: count it on the status page and write its access
    // log line. Once per exchange: for a complete answer before it is written
    // (so that the status page never lags behind what a client has seen), for
    // a streamed one when it ends (499 when the client left first).
    virtual void account(Exchange& exchange, int status, uint64_t body_bytes) = 0;
    // The exchange is over (sent, or the client left): the handler lets go of
    // what start() took.
    virtual void finish(Exchange& exchange) = 0;

protected:
    ~ExchangeHandler() = default;
};

} // namespace lepus
