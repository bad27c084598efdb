// CGI response header parsing. See cgi_response.h; RFC 3875 §6.
#include "fastcgi/cgi_response.h"

#include "base/ascii.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace lepus::fastcgi {

namespace {

bool is_token_char(char c) {
    // RFC 9110 §5.6.2 tchar.
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool equals_ignore_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return (x | 0x20) == (y | 0x20);
           });
}

} // namespace

CgiParseStatus CgiResponseParser::feed(std::span<const char> data, size_t& consumed) {
    consumed = 0;
    if (failed_) return CgiParseStatus::Error;
    if (done_) return CgiParseStatus::Done;
    // Reserved once so that the views taken at Done never dangle.
    if (buffer_.capacity() < kMaxHeaderBlock) buffer_.reserve(kMaxHeaderBlock);
    while (consumed < data.size()) {
        const char* begin = data.data() + consumed;
        const char* newline =
            static_cast<const char*>(std::memchr(begin, '\n', data.size() - consumed));
        size_t take = newline ? static_cast<size_t>(newline - begin) + 1 : data.size() - consumed;
        if (buffer_.size() + take > kMaxHeaderBlock) {
            error_value_ = {};
            fail("header block too large");
            return CgiParseStatus::Error;
        }
        buffer_.append(begin, take);
        consumed += take;
        if (!newline) return CgiParseStatus::Again;
        size_t line_end = buffer_.size() - 1; // at the LF
        if (line_end > line_start_ && buffer_[line_end - 1] == '\r') --line_end;
        if (line_end == line_start_) {
            done_ = true;
            if (!has_status_) status_ = has_location_ ? 302 : 200;
            return CgiParseStatus::Done;
        }
        if (!parse_line(line_start_, line_end)) return CgiParseStatus::Error;
        line_start_ = buffer_.size();
    }
    return CgiParseStatus::Again;
}

bool CgiResponseParser::parse_line(size_t begin, size_t end) {
    std::string_view line(buffer_.data() + begin, end - begin);
    error_value_ = line;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail("header line without a name");
    std::string_view name = line.substr(0, colon);
    // No whitespace before the colon and no obs-fold (RFC 9112 §5.1-5.2).
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return fail("bad header name");
    std::string_view value = trim_ows(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) {
            return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
        }))
        return fail("control character in a header value");
    if (equals_ignore_case(name, "status")) {
        error_value_ = value;
        // "Status: 404 Not Found": three digits, then an optional reason.
        int code = 0;
        auto result = std::from_chars(value.data(), value.data() + value.size(), code);
        if (has_status_ || result.ec != std::errc() || result.ptr - value.data() != 3 ||
            (result.ptr != value.data() + value.size() && *result.ptr != ' '))
            return fail("bad Status header");
        // RFC 9110 §15.2: a 1xx is interim, never the answer to a request, and §15.2.2:
        // no 101 without an Upgrade the client asked for. Passing one on would leave
        // the real response (and a pipelined request's) out of step: a desync, or a
        // front proxy switching to a tunnel (issue 14).
        if (code >= 100 && code <= 199) return fail("interim (1xx) Status in a final response");
        if (code < 200 || code > 599) return fail("Status outside 200..599");
        has_status_ = true;
        status_ = code;
        reason_ = trim_ows(value.substr(3));
        return true;
    }
    if (equals_ignore_case(name, "content-length")) {
        uint64_t length = 0;
        auto result = std::from_chars(value.data(), value.data() + value.size(), length);
        if (value.empty() || result.ec != std::errc() ||
            result.ptr != value.data() + value.size() ||
            (content_length_ && *content_length_ != length))
            return fail("bad Content-Length header");
        content_length_ = length;
    }
    if (equals_ignore_case(name, "location") && !value.empty()) has_location_ = true;
    headers_.push_back({name, value});
    return true;
}

bool CgiResponseParser::fail(std::string_view why) {
    failed_ = true;
    error_ = why;
    return false;
}

void CgiResponseParser::reset() {
    buffer_.clear();
    line_start_ = 0;
    done_ = failed_ = has_status_ = has_location_ = false;
    status_ = 200;
    reason_ = {};
    content_length_.reset();
    headers_.clear();
    error_ = {};
    error_value_ = {};
}

} // namespace lepus::fastcgi
