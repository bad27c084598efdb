// ResponseHead: incremental parser of an HTTP/1.x response head from a backend
// (RFC 9112 §4 status line, §5 fields), and the framing of the body that
// follows (§6.3). Bytes are fed as they arrive; the head is kept (bounded) in
// one buffer the parsed fields point into.
#pragma once

#include "http/request.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::proxy {

// How the body after the head ends (RFC 9112 §6.3).
enum class BodyFraming : uint8_t {
    None,    // HEAD, 1xx, 204, 304: no body at all
    Length,  // Content-Length bytes
    Chunked, // chunked transfer coding
    Close,   // until the backend closes the connection
    Tunnel,  // after a 101 the client asked for: bytes both ways until a close
};

class ResponseHead {
public:
    enum class Status : uint8_t { Again, Done, Error };

    // Heads larger than `max_size` bytes are an Error ("too large").
    explicit ResponseHead(size_t max_size = size_t{16} * 1024) : max_size_(max_size) {}

    // Takes bytes of `input` until the head ends; `consumed` is set to the
    // bytes of `input` used (all of them on Again). Done: the head is parsed;
    // what follows input[consumed - 1] is the body.
    Status feed(std::span<const char> input, size_t& consumed);
    // Ready for the next response.
    void reset();

    // After Done.
    int status() const { return status_; }
    int version_minor() const { return version_minor_; }
    std::span<const Header> headers() const { return headers_; }
    std::optional<uint64_t> content_length() const { return content_length_; }
    bool chunked() const { return chunked_; }
    // The backend keeps the connection open after this response (RFC 9112 §9.3).
    bool keep_alive() const { return keep_alive_; }
    // `Connection: upgrade` with an Upgrade field (a 101's).
    bool upgrade() const { return upgrade_; }
    // How the body ends, for a request whose method is HEAD or not.
    BodyFraming framing(bool head_request) const;
    // True when `name` is listed in the response's Connection field (a hop-by-hop
    // field the backend named, RFC 9110 §7.6.1).
    bool named_in_connection(std::string_view name) const;

    // After Error: why, for the error log.
    const char* error() const { return error_; }

private:
    Status parse();
    Status fail(const char* reason);

    size_t max_size_;
    std::string buffer_;
    size_t scanned_ = 0; // bytes of buffer_ already searched for the end
    int status_ = 0;
    int version_minor_ = 1;
    std::vector<Header> headers_;
    std::vector<std::string_view> connection_tokens_;
    std::optional<uint64_t> content_length_;
    bool chunked_ = false;
    bool transfer_coded_ = false; // Transfer-Encoding present, chunked or not
    bool keep_alive_ = true;
    bool upgrade_ = false;
    const char* error_ = "";
};

// Appends each comma-separated token of a Connection field value to `out`.
void split_tokens(std::string_view value, std::vector<std::string_view>& out);

// Whether `name` is a hop-by-hop field of RFC 9110 §7.6.1 (and the obsolete
// Proxy-Connection and Keep-Alive that clients still send).
bool is_hop_by_hop(std::string_view name);

} // namespace lepus::proxy
