// CgiResponseParser: the CGI response header block at the start of a FastCGI
// STDOUT stream (RFC 3875 §6), parsed incrementally.
//
// Lines end with LF or CRLF; the block ends at an empty line. "Status: 201
// Created" sets the status (RFC 3875 §6.3.3); without it a Location header
// means 302 and anything else 200, as nginx does. A Status outside 200..599 is
// an Error: a 1xx is interim (RFC 9110 §15.2) and cannot end the exchange. The header bytes are
// copied into an internal buffer reserved once (kMaxHeaderBlock), so the views of headers() stay
// valid until reset() however the stream was split into records.
#pragma once

#include "http/request.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::fastcgi {

enum class CgiParseStatus { Done, Again, Error };

class CgiResponseParser {
public:
    static constexpr size_t kMaxHeaderBlock =
        size_t{32} * 1024; // beyond it: Error (the client sends 502)

    // Parses the next bytes of the STDOUT stream. `consumed` is set to how many
    // bytes of `data` belong to the header block; on Done the rest are body.
    // Error on a malformed line, a bad Status or Content-Length, or an oversized block.
    CgiParseStatus feed(std::span<const char> data, size_t& consumed);
    // The status to send (valid after Done).
    int status() const { return status_; }
    // The reason phrase of a Status header (empty when absent or none given).
    std::string_view reason() const { return reason_; }
    // Every header but Status, in order, as sent (valid after Done, until reset()).
    std::span<const Header> headers() const { return headers_; }
    // The Content-Length header's value, when one was sent.
    std::optional<uint64_t> content_length() const { return content_length_; }
    // Why the last Error happened (a constant string for the error log).
    std::string_view error() const { return error_; }
    // The backend's bytes that caused the last Error (the Status value, else the whole
    // line; empty for an oversized block). Untrusted: escape before logging. Valid
    // until reset().
    std::string_view error_value() const { return failed_ ? error_value_ : std::string_view(); }
    // Prepares for the next response (keeps buffer capacity).
    void reset();

private:
    bool parse_line(size_t begin, size_t end);
    bool fail(std::string_view why); // records the error, returns false

    std::string buffer_; // header bytes seen so far
    size_t line_start_ = 0;
    bool done_ = false;
    bool failed_ = false;
    bool has_status_ = false;
    bool has_location_ = false;
    int status_ = 200;
    std::string_view reason_;
    std::optional<uint64_t> content_length_;
    std::vector<Header> headers_;
    std::string_view error_;
    std::string_view error_value_; // into buffer_
};

} // namespace lepus::fastcgi
