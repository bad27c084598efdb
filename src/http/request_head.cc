// RequestParser's second half: what the head means once its lines are cut —
// the request line's method, target and version, each field line's effect
// (Host, Content-Length, Transfer-Encoding, Connection, Expect, the fields
// handlers read), and the checks across fields at the end of the head
// (RFC 9112 §3, §5, §6). request_parser.cc cuts the bytes.
#include "http/detail/request_syntax.h"
#include "http/request_parser.h"

#include <cstring>
#include <optional>
#include <string_view>

namespace lepus {

using namespace detail;

namespace {

// The header fields the parser acts on. The first ones are remembered in field_index_.
enum class Field : uint8_t {
    Host,
    IfNoneMatch,
    IfModifiedSince,
    IfMatch,
    IfUnmodifiedSince,
    Range,
    IfRange,
    AcceptEncoding,
    Referer,
    UserAgent,
    ContentType,
    ContentLength, // not remembered from here on
    TransferEncoding,
    Connection,
    Expect,
    Other,
};

struct ConvenienceField {
    Field field;
    std::string_view Request::*member;
};

constexpr ConvenienceField kConvenienceFields[] = {
    {Field::IfNoneMatch, &Request::if_none_match},
    {Field::IfModifiedSince, &Request::if_modified_since},
    {Field::IfMatch, &Request::if_match},
    {Field::IfUnmodifiedSince, &Request::if_unmodified_since},
    {Field::Range, &Request::range},
    {Field::IfRange, &Request::if_range},
    {Field::AcceptEncoding, &Request::accept_encoding},
    {Field::Referer, &Request::referer},
    {Field::UserAgent, &Request::user_agent},
    {Field::ContentType, &Request::content_type},
};

Field classify_field(std::string_view name) {
    switch (name.size()) {
    case 4:
        return equals_lower(name, "host") ? Field::Host : Field::Other;
    case 5:
        return equals_lower(name, "range") ? Field::Range : Field::Other;
    case 6:
        return equals_lower(name, "expect") ? Field::Expect : Field::Other;
    case 7:
        return equals_lower(name, "referer") ? Field::Referer : Field::Other;
    case 8:
        if (equals_lower(name, "if-match")) return Field::IfMatch;
        return equals_lower(name, "if-range") ? Field::IfRange : Field::Other;
    case 10:
        if (equals_lower(name, "connection")) return Field::Connection;
        return equals_lower(name, "user-agent") ? Field::UserAgent : Field::Other;
    case 12:
        return equals_lower(name, "content-type") ? Field::ContentType : Field::Other;
    case 13:
        return equals_lower(name, "if-none-match") ? Field::IfNoneMatch : Field::Other;
    case 14:
        return equals_lower(name, "content-length") ? Field::ContentLength : Field::Other;
    case 15:
        return equals_lower(name, "accept-encoding") ? Field::AcceptEncoding : Field::Other;
    case 17:
        if (equals_lower(name, "transfer-encoding")) return Field::TransferEncoding;
        return equals_lower(name, "if-modified-since") ? Field::IfModifiedSince : Field::Other;
    case 19:
        return equals_lower(name, "if-unmodified-since") ? Field::IfUnmodifiedSince : Field::Other;
    default:
        return Field::Other;
    }
}

// Content-Length = 1*DIGIT (RFC 9110 §8.6). A list of identical values ("5, 5", sent
// by some intermediaries) is accepted as that value; anything else is invalid. Values
// above 2^63-1 are rejected so they always fit an off_t.
bool parse_content_length(std::string_view value, uint64_t& out) {
    constexpr uint64_t kMax = (uint64_t{1} << 63) - 1;
    bool first = true;
    size_t i = 0;
    for (;;) {
        while (i < value.size() && is_ows(value[i]))
            ++i;
        size_t digits_start = i;
        uint64_t number = 0;
        for (; i < value.size() && is_digit(value[i]); ++i) {
            uint64_t digit = value[i] - '0';
            if (number > (kMax - digit) / 10) return false;
            number = number * 10 + digit;
        }
        if (i == digits_start) return false;
        if (!first && number != out) return false;
        out = number;
        first = false;
        while (i < value.size() && is_ows(value[i]))
            ++i;
        if (i == value.size()) return true;
        if (value[i] != ',') return false;
        ++i;
    }
}

// A path or query whose bytes passed the kTargetByte scan: '[' and ']' are only for
// IP literals in the authority, and every '%' must start a pct-encoded octet.
bool is_valid_path_or_query(std::string_view text) {
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '[' || c == ']') return false;
        if (c == '%') {
            if (i + 2 >= text.size() || !is_hex(text[i + 1]) || !is_hex(text[i + 2])) return false;
            i += 2;
        }
    }
    return true;
}

} // namespace

// Host being an IP-literal, an IPv4 address or a reg-name (RFC 3986 §3.2.2), never
// empty, no userinfo (RFC 9110 §4.2.4 forbids it in http URIs); the port may be
// empty, unless require_port (CONNECT).
bool is_valid_authority(std::string_view authority, bool require_port) {
    size_t i = 0;
    if (authority.empty()) return false;
    if (authority[0] == '[') {
        size_t close = authority.find(']');
        if (close == std::string_view::npos || close == 1) return false;
        for (i = 1; i < close; ++i)
            if (!is_hex(authority[i]) && authority[i] != ':' && authority[i] != '.') return false;
        i = close + 1;
    } else {
        while (i < authority.size() && authority[i] != ':') {
            if (authority[i] == '%') {
                if (i + 2 >= authority.size() || !is_hex(authority[i + 1]) ||
                    !is_hex(authority[i + 2]))
                    return false;
                i += 3;
            } else if (has_class(authority[i], kHostByte)) {
                ++i;
            } else {
                return false;
            }
        }
        if (i == 0) return false;
    }
    if (i == authority.size()) return !require_port;
    if (authority[i] != ':') return false;
    std::string_view port = authority.substr(i + 1);
    if (port.empty()) return !require_port;
    if (port.size() > 5) return false;
    uint32_t number = 0;
    for (char c : port) {
        if (!is_digit(c)) return false;
        number = number * 10 + (c - '0');
    }
    return number <= 65535;
}

std::string_view Request::*request_field_member(std::string_view name) {
    Field field = classify_field(name);
    for (const ConvenienceField& f : kConvenienceFields)
        if (f.field == field) return f.member;
    return nullptr;
}

// field_index_ in request_parser.h has room for every remembered field.
static_assert(static_cast<size_t>(Field::ContentLength) <= 16);

bool RequestParser::finish_request_line(const char* buf) {
    if (version_end_ - line_start_ > limits_.max_request_line) {
        fail(414, "request line too long");
        return false;
    }
    std::string_view version(buf + version_start_, version_end_ - version_start_);
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !is_digit(version[5]) ||
        version[6] != '.' || !is_digit(version[7])) {
        fail(400, "invalid HTTP version");
        return false;
    }
    // RFC 9110 §2.5: a 1.x request with a minor version above ours is processed (and
    // answered) as the highest 1.x we speak, 1.1, as nginx does; another major
    // version in an HTTP/1 request line stays 505. HTTP/0.x too: 0.9 has no version
    // field at all, so "HTTP/0.9" is not a request we can answer as it expects.
    if (version[5] != '1') {
        fail(505, "unsupported HTTP version");
        return false;
    }
    version_minor_ = version[7] == '0' ? 0 : 1;
    std::optional<Method> method =
        method_from_name(std::string_view(buf + line_start_, method_end_ - line_start_));
    if (!method) { // the Method state let only token bytes through
        fail(400, "invalid method");
        return false;
    }
    method_ = *method;
    if (!analyze_target(buf)) {
        fail(400, "invalid request-target");
        return false;
    }
    return true;
}

// Splits the request-target into its form's parts (RFC 9112 §3.2).
bool RequestParser::analyze_target(const char* buf) {
    std::string_view target(buf + target_start_, target_end_ - target_start_);
    size_t rest = 0; // where path-abempty [ "?" query ] starts within target
    if (target[0] == '/') {
        // origin-form: the common case
    } else if (target == "*") {
        // asterisk-form, only for a server-wide OPTIONS (RFC 9112 §3.2.4)
        if (method_ != Method::Options) return false;
        path_start_ = target_start_;
        path_size_ = 1;
        return true;
    } else if (method_ == Method::Connect) {
        // authority-form, only for CONNECT (RFC 9112 §3.2.3)
        if (!is_valid_authority(target, true)) return false;
        url_has_host_ = true;
        url_host_start_ = target_start_;
        url_host_size_ = target.size();
        return true;
    } else {
        // absolute-form; its host wins over the Host field (RFC 9112 §3.2.2)
        size_t scheme_size = starts_with_lower(target, "http://")    ? 7
                             : starts_with_lower(target, "https://") ? 8
                                                                     : 0;
        if (scheme_size == 0) return false;
        size_t host_end = target.find_first_of("/?", scheme_size);
        if (host_end == std::string_view::npos) host_end = target.size();
        if (!is_valid_authority(target.substr(scheme_size, host_end - scheme_size), false))
            return false;
        url_has_host_ = true;
        url_host_start_ = target_start_ + scheme_size;
        url_host_size_ = host_end - scheme_size;
        rest = host_end;
        path_is_root_ = rest == target.size() || target[rest] == '?';
    }
    if (method_ == Method::Connect) return false; // CONNECT takes only authority-form
    // The first '?' starts the query: an authority cannot hold one.
    size_t question = query_mark_ ? query_mark_ - 1 - target_start_ : target.size();
    std::string_view path = target.substr(rest, question - rest);
    path_start_ = target_start_ + rest;
    path_size_ = path.size();
    if (question < target.size()) {
        query_start_ = query_mark_;
        query_size_ = target.size() - question - 1;
    }
    if (!target_needs_check_) return true;
    return is_valid_path_or_query(path) &&
           is_valid_path_or_query(view_of(buf, query_start_, query_size_));
}

// One complete field line: remember it and apply the fields that shape the request.
bool RequestParser::finish_field(const char* buf) {
    if (value_end_ - head_start_ > limits_.max_header_block) {
        fail(431, "header block too large");
        return false;
    }
    while (value_end_ > value_start_ && is_ows(buf[value_end_ - 1]))
        --value_end_;
    std::string_view name(buf + name_start_, name_end_ - name_start_);
    std::string_view value(buf + value_start_, value_end_ - value_start_);
    size_t index = field_count_++;
    field_offsets_[index] = {static_cast<uint32_t>(name_start_), static_cast<uint32_t>(name.size()),
                             static_cast<uint32_t>(value_start_),
                             static_cast<uint32_t>(value.size())};

    Field field = classify_field(name);
    switch (field) {
    case Field::Host:
        // RFC 9112 §3.2: exactly one Host, with a valid value (empty is allowed).
        if (++host_count_ > 1) return fail(400, "more than one Host"), false;
        if (!value.empty() && !is_valid_authority(value, false))
            return fail(400, "invalid Host"), false;
        break;
    case Field::ContentLength: {
        uint64_t length = 0;
        if (!parse_content_length(value, length)) return fail(400, "invalid Content-Length"), false;
        if (has_content_length_ && length != content_length_)
            return fail(400, "conflicting Content-Length values"), false;
        has_content_length_ = true;
        content_length_ = length;
        return true;
    }
    case Field::TransferEncoding: {
        // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is a smuggling attempt.
        if (version_minor_ == 0) return fail(400, "Transfer-Encoding in HTTP/1.0"), false;
        has_transfer_encoding_ = true;
        bool valid = true, chunked_twice = false;
        bool chunked_parameters = false;
        for_each_element(value, [&](std::string_view element) {
            std::string_view coding = trim_ows(element.substr(0, element.find(';')));
            for (char c : coding)
                if (!has_class(c, kTokenByte)) valid = false;
            if (coding.empty()) valid = false;
            if (chunked_seen_) chunked_twice = true; // chunked must be the final coding
            chunked_seen_ = equals_lower(coding, "chunked");
            if (!chunked_seen_) unsupported_coding_ = true;
            // RFC 9112 §7: chunked takes no parameters. "chunked;x=y" is no coding we
            // know, and a front end that ignores the parameter frames the body
            // differently from one that does not: 400 and close, not 501.
            if (chunked_seen_ && coding.size() != element.size()) chunked_parameters = true;
        });
        if (!valid) return fail(400, "invalid Transfer-Encoding"), false;
        if (chunked_parameters) return fail(400, "parameters on chunked"), false;
        if (chunked_twice) return fail(400, "chunked is not the final transfer coding"), false;
        return true;
    }
    case Field::Connection:
        for_each_element(value, [this](std::string_view option) {
            if (equals_lower(option, "close")) connection_close_ = true;
            if (equals_lower(option, "keep-alive")) connection_keep_alive_ = true;
        });
        return true;
    case Field::Expect:
        // RFC 9110 §10.1.1: a server MUST ignore 100-continue in an HTTP/1.0 request.
        if (version_minor_ == 1 && equals_lower(value, "100-continue")) expect_continue_ = true;
        return true;
    case Field::Other:
        return true;
    default:
        break;
    }
    // Convenience fields (and Host): the first occurrence is the one the server reads.
    int32_t& slot = field_index_[static_cast<size_t>(field)];
    if (slot < 0) slot = static_cast<int32_t>(index);
    return true;
}

// The empty line arrived: check the head as a whole and build the Request's views.
ParseStatus RequestParser::finish_head(std::span<const char> data, size_t end) {
    if (end - head_start_ > limits_.max_header_block) return fail(431, "header block too large");
    if (version_minor_ == 1 && host_count_ == 0) return fail(400, "HTTP/1.1 request without Host");
    if (has_transfer_encoding_) {
        // RFC 9112 §6.3: both framings, or chunked not final, leave the body length
        // unknowable: 400 and close (every error closes the connection).
        if (has_content_length_) return fail(400, "both Content-Length and Transfer-Encoding");
        if (!chunked_seen_) return fail(400, "chunked is not the final transfer coding");
        if (unsupported_coding_) return fail(501, "unsupported transfer coding");
    }

    const char* buf = data.data();
    auto view = [buf](size_t offset, size_t size) { return std::string_view(buf + offset, size); };
    for (size_t i = 0; i < field_count_; ++i) {
        const FieldOffsets& f = field_offsets_[i];
        headers_[i] = {view(f.name, f.name_size), view(f.value, f.value_size)};
    }
    Request& r = request_;
    r.method = method_;
    r.method_text = view(line_start_, method_end_ - line_start_);
    r.target = view(target_start_, target_end_ - target_start_);
    r.path = path_is_root_ ? std::string_view("/") : view(path_start_, path_size_);
    r.query = view(query_start_, query_size_);
    r.version_minor = version_minor_;
    r.headers = std::span<const Header>(headers_.data(), field_count_);
    int32_t host_index = field_index_[static_cast<size_t>(Field::Host)];
    if (url_has_host_)
        r.host = view(url_host_start_, url_host_size_);
    else if (host_index >= 0)
        r.host = headers_[host_index].value;
    if (has_content_length_) r.content_length = content_length_;
    r.chunked = has_transfer_encoding_;
    // RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive".
    r.keep_alive = !connection_close_ && (version_minor_ == 1 || connection_keep_alive_);
    r.expect_continue = expect_continue_;
    for (const ConvenienceField& f : kConvenienceFields) {
        int32_t index = field_index_[static_cast<size_t>(f.field)];
        if (index >= 0) r.*f.member = headers_[index].value;
    }

    head_size_ = end;
    pos_ = end;
    state_ = State::Done;
    return ParseStatus::Done;
}

} // namespace lepus
