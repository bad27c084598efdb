#include "http/request_parser.h"

#include "http/detail/request_syntax.h"

#include <cstring>
#include <string_view>

namespace lepus {

using namespace detail;

RequestParser::RequestParser(ParserLimits limits)
    : limits_(limits), field_offsets_(limits.max_headers), headers_(limits.max_headers) {
    reset();
}

void RequestParser::reset() {
    state_ = State::LineStart;
    pos_ = 0;
    line_start_ = method_end_ = target_start_ = target_end_ = 0;
    version_start_ = version_end_ = 0;
    path_start_ = path_size_ = query_start_ = query_size_ = 0;
    url_host_start_ = url_host_size_ = 0;
    url_has_host_ = path_is_root_ = target_needs_check_ = false;
    query_mark_ = 0;
    head_start_ = name_start_ = name_end_ = value_start_ = value_end_ = 0;
    field_count_ = 0;
    field_index_.fill(-1);
    method_ = Method::Get;
    version_minor_ = 1;
    host_count_ = 0;
    has_content_length_ = false;
    content_length_ = 0;
    has_transfer_encoding_ = chunked_seen_ = unsupported_coding_ = false;
    connection_close_ = connection_keep_alive_ = expect_continue_ = false;
    request_ = Request{};
    head_size_ = 0;
    error_status_ = 0;
    error_reason_ = "";
}

ParseStatus RequestParser::fail(int status, const char* reason) {
    state_ = State::Error;
    error_status_ = status;
    error_reason_ = reason;
    return ParseStatus::Error;
}

// The state machine is one switch in one loop, as nginx's
// ngx_http_parse_request_line: splitting it would cost a call per byte and
// scatter the states. It is the one function here over 100 lines, on purpose.
ParseStatus RequestParser::parse(std::span<const char> data) {
    if (state_ == State::Done) return ParseStatus::Done;
    if (state_ == State::Error) return ParseStatus::Error;
    const char* buf = data.data();
    const size_t end = data.size();
    size_t p = pos_;
    State state = state_;

    while (p < end) {
        char c = buf[p];
        switch (state) {
        case State::LineStart:
            if (c == '\r') {
                state = State::LeadingLf;
            } else if (c != '\n') {
                if (!has_class(c, kTokenByte)) return fail(400, "invalid method");
                // The same bound as check_limits_and_wait, so that the answer does not
                // depend on whether a read ended inside the empty lines (found by fuzzing).
                if (p > limits_.max_request_line) return fail(400, "too many empty lines");
                line_start_ = p;
                state = State::Method;
            }
            ++p;
            break;

        case State::LeadingLf:
            if (c != '\n') return fail(400, "bare CR before the request line");
            state = State::LineStart;
            ++p;
            break;

        case State::Method:
            p = skip_class(buf, p, end, kTokenByte);
            if (p == end) break;
            if (buf[p] != ' ') return fail(400, "invalid method");
            method_end_ = p++;
            target_start_ = p;
            state = State::Target;
            break;

        case State::Target:
            // Plain bytes in bulk; '?' and the bytes analyze_target must look at again
            // ('%', '[', ']') one by one, remembered so the common target is read once.
            for (;;) {
                p = skip_class(buf, p, end, kTargetByte);
                if (p == end) break;
                if (buf[p] == '?') {
                    if (query_mark_ == 0) query_mark_ = p + 1;
                } else if (buf[p] == '%' || buf[p] == '[' || buf[p] == ']') {
                    target_needs_check_ = true;
                } else if (buf[p] != '"' || query_mark_ == 0) {
                    // A raw '"' only in the query, where old clients send it (browsers
                    // encode it in the path). Still refused, though nginx takes them:
                    // '<', '>', '#' (no browser sends them raw), and CTLs, SP, DEL and
                    // bytes >= 0x80 (RFC 9112 §3.2; a lenient split on them is how
                    // request lines are smuggled).
                    break;
                }
                ++p;
            }
            if (p == end) break;
            if (buf[p] != ' ' || p == target_start_) return fail(400, "invalid request-target");
            target_end_ = p++;
            version_start_ = p;
            state = State::Version;
            break;

        case State::Version:
            while (p < end && p - version_start_ <= 8 &&
                   (has_class(buf[p], kTokenByte) || buf[p] == '/'))
                ++p;
            if (p - version_start_ > 8) return fail(400, "invalid HTTP version");
            if (p == end) break;
            version_end_ = p;
            if (buf[p] == '\r') {
                state = State::RequestLineLf;
                ++p;
                break;
            }
            if (buf[p] != '\n') return fail(400, "invalid HTTP version");
            ++p;
            if (!finish_request_line(buf)) return ParseStatus::Error;
            head_start_ = p;
            state = State::FieldStart;
            break;

        case State::RequestLineLf:
            if (c != '\n') return fail(400, "bare CR in the request line");
            ++p;
            if (!finish_request_line(buf)) return ParseStatus::Error;
            head_start_ = p;
            state = State::FieldStart;
            break;

        case State::FieldStart:
            if (c == '\r') {
                state = State::HeadEndLf;
                ++p;
                break;
            }
            if (c == '\n') return finish_head(data, p + 1);
            // RFC 9112 §5.2: obs-fold is rejected, and a line starting with whitespace
            // right after the request line is an attempt to hide a field (§2.2).
            if (is_ows(c)) return fail(400, "obsolete line folding");
            if (!has_class(c, kTokenByte)) return fail(400, "invalid header name");
            if (field_count_ == limits_.max_headers) return fail(431, "too many header fields");
            name_start_ = p++;
            state = State::FieldName;
            [[fallthrough]]; // the rest of a field line usually follows: no dispatch

        case State::FieldName:
            p = skip_class(buf, p, end, kTokenByte);
            if (p == end) break;
            // RFC 9112 §5.1: no whitespace between the field name and the colon.
            if (buf[p] != ':') return fail(400, "invalid header name");
            name_end_ = p++;
            state = State::ValueStart;
            [[fallthrough]];

        case State::ValueStart:
            while (p < end && is_ows(buf[p]))
                ++p;
            if (p == end) break;
            value_start_ = p;
            state = State::Value;
            [[fallthrough]];

        case State::Value:
            p = skip_value_bytes(buf, p, end);
            if (p == end) break;
            value_end_ = p;
            if (buf[p] == '\n') {
                ++p;
                if (!finish_field(buf)) return ParseStatus::Error;
                state = State::FieldStart;
                break;
            }
            if (buf[p] != '\r') return fail(400, "invalid character in header value");
            state = State::FieldLf;
            if (++p == end) break;
            [[fallthrough]];

        case State::FieldLf:
            if (buf[p] != '\n') return fail(400, "bare CR in header");
            ++p;
            if (!finish_field(buf)) return ParseStatus::Error;
            state = State::FieldStart;
            break;

        case State::HeadEndLf:
            if (c != '\n') return fail(400, "bare CR after the headers");
            return finish_head(data, p + 1);

        case State::Done:
        case State::Error:
            break; // unreachable: handled on entry
        }
    }
    pos_ = p;
    state_ = state;
    return check_limits_and_wait(p);
}

// Limits are checked while the bytes are still arriving, so a client cannot make us
// buffer an endless line before we notice.
ParseStatus RequestParser::check_limits_and_wait(size_t pos) {
    switch (state_) {
    case State::LineStart:
    case State::LeadingLf:
        if (pos > limits_.max_request_line) return fail(400, "too many empty lines");
        break;
    case State::Method:
    case State::Target:
    case State::Version:
        if (pos - line_start_ > limits_.max_request_line) return fail(414, "request line too long");
        break;
    case State::RequestLineLf:
        if (version_end_ - line_start_ > limits_.max_request_line)
            return fail(414, "request line too long");
        break;
    default:
        if (pos - head_start_ > limits_.max_header_block)
            return fail(431, "header block too large");
        break;
    }
    return ParseStatus::Again;
}

} // namespace lepus
