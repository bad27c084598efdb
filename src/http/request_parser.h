// RequestParser: a strict, incremental HTTP/1.1 request-head parser (RFC 9112).
//
// A resumable state machine in the style of nginx's ngx_http_parse_request_line:
// it can stop at any byte and resume when more arrives. It keeps offsets, never
// pointers, so the connection buffer may grow or move between calls; the views
// of the Request are built at Done from the latest buffer. No allocation per
// request: the header array is sized once, from ParserLimits, at construction.
//
// Strictness is the point (lenient parsing is how request smuggling happens):
// one SP between request-line parts, no whitespace before a field's colon, no
// obs-fold, no bare CR, no control characters, a single well-formed Host, one
// Content-Length value, chunked as the final (and only) transfer coding, never
// both framings, no parameters on chunked. Leniencies: a bare LF ends the request
// line and field lines as CRLF does (RFC 9112 §2.2; a bare CR never does); the
// characters browsers send raw in a target ("|^{}\`", and '"' in the query) are
// accepted as nginx accepts them; HTTP/1.2..1.9 is read as HTTP/1.1 (RFC 9110 §2.5).
#pragma once

#include "http/request.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lepus {

enum class ParseStatus { Done, Again, Error };

struct ParserLimits {
    // Bytes of the request line, CRLF excluded (else 414); also bounds the empty lines
    // allowed before it (else 400).
    size_t max_request_line = 8192;
    size_t max_header_block = 32768; // bytes of the field lines, final CRLF included (else 431)
    size_t max_headers = 100;        // field lines (else 431)
};

class RequestParser {
public:
    explicit RequestParser(ParserLimits limits = {});

    // Parses `data`: every byte received for this request so far, from its first byte.
    // Resumes where the previous call stopped; `data` may have moved but must start
    // with the same bytes. Done: the head is complete; Again: need more; Error: see
    // error_status(). Bytes after the head (body, pipelined requests) are not read.
    ParseStatus parse(std::span<const char> data);

    // The parsed head; valid after Done, as views into the `data` of the last call.
    const Request& request() const { return request_; }

    // After Done: bytes of the head including the final empty line (the body starts here).
    size_t head_size() const { return head_size_; }

    // After Error: the status to answer with, 400, 414, 431, 501 or 505.
    int error_status() const { return error_status_; }

    // After Error: a short description for the error log.
    const char* error_reason() const { return error_reason_; }

    // Ready for the next request on the connection; keeps the header array.
    void reset();

private:
    enum class State : uint8_t {
        LineStart,     // before the method; empty lines are skipped (RFC 9112 §2.2)
        LeadingLf,     // after the CR of an empty line before the request line
        Method,        // in the method token
        Target,        // in the request-target
        Version,       // in "HTTP/x.y"
        RequestLineLf, // after the CR of the request line
        FieldStart,    // at the start of a field line or of the final empty line
        FieldName,     // in a field name
        ValueStart,    // in the whitespace before a field value
        Value,         // in a field value
        FieldLf,       // after the CR of a field line
        HeadEndLf,     // after the CR of the final empty line
        Done,
        Error,
    };

    // A field line as offsets into the buffer (the buffer may move before Done).
    struct FieldOffsets {
        uint32_t name, name_size, value, value_size;
    };

    ParseStatus fail(int status, const char* reason);
    bool finish_request_line(const char* buf);
    bool analyze_target(const char* buf);
    bool finish_field(const char* buf);
    ParseStatus finish_head(std::span<const char> data, size_t end);
    ParseStatus check_limits_and_wait(size_t pos);

    ParserLimits limits_;
    State state_ = State::LineStart;
    size_t pos_ = 0; // next byte to read

    // Request line, as offsets.
    size_t line_start_ = 0, method_end_ = 0, target_start_ = 0, target_end_ = 0;
    size_t version_start_ = 0, version_end_ = 0;
    size_t path_start_ = 0, path_size_ = 0, query_start_ = 0, query_size_ = 0;
    size_t url_host_start_ = 0, url_host_size_ = 0;
    bool url_has_host_ = false;
    bool path_is_root_ = false;       // absolute-form without a path: path is "/"
    size_t query_mark_ = 0;           // offset after the target's first '?', 0 when none
    bool target_needs_check_ = false; // target holds '%', '[' or ']'; see analyze_target

    // Current field line and the head so far.
    size_t head_start_ = 0, name_start_ = 0, name_end_ = 0, value_start_ = 0, value_end_ = 0;
    size_t field_count_ = 0;
    std::vector<FieldOffsets> field_offsets_; // max_headers entries, reused
    std::vector<Header> headers_;             // max_headers entries, built at Done
    std::array<int32_t, 16> field_index_{};   // first field line of each known header, or -1

    // Semantics gathered from the fields.
    Method method_ = Method::Get;
    int version_minor_ = 1;
    int host_count_ = 0;
    bool has_content_length_ = false;
    uint64_t content_length_ = 0;
    bool has_transfer_encoding_ = false;
    bool chunked_seen_ = false;          // "chunked" was the last coding seen so far
    bool unsupported_coding_ = false;    // a coding other than chunked (501)
    bool connection_close_ = false;      // Connection: close
    bool connection_keep_alive_ = false; // Connection: keep-alive
    bool expect_continue_ = false;

    Request request_;
    size_t head_size_ = 0;
    int error_status_ = 0;
    const char* error_reason_ = "";
};

} // namespace lepus
