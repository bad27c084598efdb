#include "http/detail/http2_stream.h"

#include "base/ascii.h"

#include <array>
#include <charconv>

namespace lepus {

namespace {

// RFC 9113 §8.3.1: the host is :authority, else the host field; both there
// and different, the request is malformed, as it is with two host fields
// (RFC 9112 §3.2): 400, as HTTP/1.1 answers (over HTTP/3, nghttp3 may reset
// such a stream first). Then the value passes
// the HTTP/1.1 Host check (no userinfo, RFC 9110 §4.2.4): a handler cannot tell which engine it
// came by. Host names compare case-insensitively (RFC 3986 §3.2.2).
bool choose_host(std::string_view authority, bool has_authority, std::string_view host_field,
                 int host_fields, std::string_view& host) {
    if (host_fields > 1) return false;
    if (has_authority && host_fields == 1 && !ascii_iequals(authority, host_field)) return false;
    std::string_view chosen = has_authority ? authority : host_field;
    if (!chosen.empty() && !is_valid_authority(chosen, false)) return false;
    host = chosen; // refused, the request has none: the default site answers
    return true;
}

// RFC 9110 §5.6.2's tchar, lowercase only (RFC 9113 §8.2.1), as a table:
// a field name costs a load per byte.
constexpr std::array<bool, 256> kNameChars = [] {
    std::array<bool, 256> table{};
    for (int c = 'a'; c <= 'z'; ++c)
        table[size_t(c)] = true;
    for (int c = '0'; c <= '9'; ++c)
        table[size_t(c)] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~"))
        table[static_cast<unsigned char>(c)] = true;
    return table;
}();

bool valid_name(std::string_view name) {
    bool valid = !name.empty();
    for (char c : name)
        valid &= kNameChars[static_cast<unsigned char>(c)];
    return valid;
}

// §8.2.1: no NUL, CR or LF, and no space or tab at either end. A table
// lookup per byte, no branch (user-agent and accept values are long).
constexpr std::array<uint8_t, 256> kBadValueChars = [] {
    std::array<uint8_t, 256> table{};
    table['\0'] = table['\r'] = table['\n'] = 1;
    return table;
}();

bool valid_value(std::string_view value) {
    uint8_t bad = 0;
    for (char c : value)
        bad |= kBadValueChars[static_cast<unsigned char>(c)];
    if (bad) return false;
    if (value.empty()) return true;
    auto blank = [](char c) { return c == ' ' || c == '\t'; };
    return !blank(value.front()) && !blank(value.back());
}

// §8.2.2: HTTP/1.1 connection management has no place in HTTP/2.
bool connection_field(std::string_view name) {
    return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
           name == "transfer-encoding" || name == "upgrade";
}

// RFC 9218 §4: "u=N" (0..7) and "i" (or "i=?1") in a structured dictionary;
// anything else in it is ignored, as §4 asks.
void parse_priority(std::string_view value, uint8_t& urgency, bool& incremental) {
    while (!value.empty()) {
        size_t comma = value.find(',');
        std::string_view member = value.substr(0, comma);
        value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
        while (!member.empty() && member.front() == ' ')
            member.remove_prefix(1);
        while (!member.empty() && member.back() == ' ')
            member.remove_suffix(1);
        if (member.size() == 3 && member.starts_with("u=") && member[2] >= '0' && member[2] <= '7')
            urgency = uint8_t(member[2] - '0');
        else if (member == "i" || member == "i=?1")
            incremental = true;
        else if (member == "i=?0")
            incremental = false;
    }
}

} // namespace

bool Http2Stream::add_field(std::string_view name, std::string_view value, uint8_t static_name) {
    TextRef value_ref = keep(value);
    TextRef name_ref = static_name != 0 || name.starts_with(':') ? TextRef{} : keep(name);
    return add_field(name, value, static_name, name_ref, value_ref);
}

bool Http2Stream::add_field(std::string_view name, std::string_view value, uint8_t static_name,
                            TextRef name_ref, TextRef value_ref) {
    if (!valid_value(value)) return false;
    if (!name.empty() && name[0] == ':') {
        if (regular_seen) return false; // §8.3: pseudo-fields come first
        if (name == ":method") {
            if (has_method) return false;
            has_method = true;
            method = value_ref;
        } else if (name == ":path") {
            if (has_path || value.empty()) return false;
            has_path = true;
            path = value_ref;
        } else if (name == ":authority") {
            if (has_authority) return false;
            authority = value_ref;
            has_authority = true;
        } else if (name == ":scheme") {
            // https or http: the connection says which.
            if (has_scheme) return false;
            has_scheme = true;
        } else {
            return false; // :status, :protocol or unknown (§8.3)
        }
        return true;
    }
    regular_seen = true;
    // A name from HPACK's static table is a valid one (RFC 7541 Appendix A);
    // of them only transfer-encoding (57) is a connection field.
    constexpr uint8_t kTransferEncoding = 57;
    bool checked = static_name != 0 && static_name != kTransferEncoding;
    if (!checked && (!valid_name(name) || connection_field(name))) return false;
    if (name == "te" && value != "trailers") return false;
    if (name == "cookie") {
        // §8.2.3: split cookies are joined with "; " for an HTTP/1.1 context (CGI).
        if (!cookie.empty()) cookie.append("; ");
        cookie.append(value);
        return true;
    }
    if (name == "priority") parse_priority(value, urgency, incremental);
    if (name == "content-length") {
        uint64_t length = 0;
        auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (error != std::errc() || end != value.data() + value.size() ||
            length > uint64_t(INT64_MAX) ||
            (expected_length >= 0 && int64_t(length) != expected_length))
            return false;
        expected_length = int64_t(length);
    }
    if (fields.empty()) fields.reserve(16);
    if (static_name != 0) name_ref = TextRef{kStaticName | static_name, uint32_t(name.size())};
    auto field = std::pair{name_ref, value_ref};
    if (name == "host" && host_fields++ == 0) host_field = field.second;
    fields.push_back(field);
    return true;
}

bool Http2Stream::head_complete() const {
    if (!has_method) return false;
    if (view(method) == "CONNECT") return has_authority && !has_scheme && !has_path;
    return has_scheme && has_path;
}

bool Http2Stream::valid_trailer(std::string_view name, std::string_view value) {
    return valid_name(name) && !connection_field(name) && valid_value(value);
}

int Http2Stream::complete_request() {
    if (!cookie.empty()) fields.emplace_back(keep("cookie"), keep(cookie));
    // `text` is complete: views into it hold from here.
    std::string_view method_text = view(method);
    request.method_text = method_text;
    request.target = view(path);
    std::string_view target = request.target;
    size_t mark = target.find('?');
    request.path = target.substr(0, mark);
    request.query = mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
    request.version_major = 2;
    request.version_minor = 1; // see Request::version_minor
    bool host_ok =
        choose_host(view(authority), has_authority, view(host_field), host_fields, request.host);
    request.keep_alive = true;
    headers.clear();
    headers.reserve(fields.size());
    for (const auto& [name_ref, value_ref] : fields) {
        std::string_view n = view(name_ref);
        std::string_view value = view(value_ref);
        headers.push_back({n, value});
        if (n == "content-length") {
            uint64_t length = 0;
            if (std::from_chars(value.data(), value.data() + value.size(), length).ec ==
                std::errc())
                request.content_length = length;
        } else if (auto member = request_field_member(n)) {
            request.*member = value; // the same fields the HTTP/1.1 parser fills
        }
    }
    request.headers = headers;
    // A body of unknown length is "chunked" to the handlers (FastCGI
    // gathers it to give php-fpm a CONTENT_LENGTH).
    if (request_ended)
        request.content_length.reset();
    else if (!request.content_length)
        request.chunked = true;
    if (!host_ok) return 400;
    // RFC 9110 §9.1: any token is a method (WebDAV's go to the backends).
    std::optional<Method> known = method_from_name(method_text);
    if (!known) return 400;
    request.method = *known;
    return 0;
}

} // namespace lepus
