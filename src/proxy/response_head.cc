#include "proxy/response_head.h"

#include "base/ascii.h"

#include <algorithm>
#include <charconv>

namespace lepus::proxy {
namespace {

// RFC 9110 §5.6.2 tchar.
bool is_token_char(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// The next line of `rest` (without its LF or CRLF), or nullopt at the end.
std::optional<std::string_view> next_line(std::string_view& rest) {
    size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) return std::nullopt;
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
}

} // namespace

void split_tokens(std::string_view value, std::vector<std::string_view>& out) {
    while (!value.empty()) {
        size_t comma = value.find(',');
        std::string_view token = trim_ows(value.substr(0, comma));
        if (!token.empty()) out.push_back(token);
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
}

bool is_hop_by_hop(std::string_view name) {
    using namespace std::string_view_literals; // lengths known when compiled, no strlen
    for (std::string_view hop : {"Connection"sv, "Keep-Alive"sv, "Proxy-Connection"sv, "TE"sv,
                                 "Transfer-Encoding"sv, "Upgrade"sv, "Trailer"sv})
        if (ascii_iequals(name, hop)) return true;
    return false;
}

void ResponseHead::reset() {
    buffer_.clear();
    scanned_ = 0;
    status_ = 0;
    version_minor_ = 1;
    headers_.clear();
    connection_tokens_.clear();
    content_length_.reset();
    chunked_ = transfer_coded_ = upgrade_ = false;
    keep_alive_ = true;
    error_ = "";
}

ResponseHead::Status ResponseHead::fail(const char* reason) {
    error_ = reason;
    return Status::Error;
}

ResponseHead::Status ResponseHead::feed(std::span<const char> input, size_t& consumed) {
    consumed = 0;
    size_t before = buffer_.size();
    // Never hold more than the bound (plus the bytes that show it is exceeded).
    size_t take = std::min(input.size(), max_size_ + 1 - std::min(before, max_size_ + 1));
    buffer_.append(input.data(), take);
    // The head ends at an empty line: LF LF or LF CR LF (a lone LF ends a line
    // too, RFC 9112 §2.2).
    for (size_t i = std::max<size_t>(scanned_, 1); i < buffer_.size(); ++i) {
        if (buffer_[i] != '\n') continue;
        bool end =
            buffer_[i - 1] == '\n' || (i >= 2 && buffer_[i - 1] == '\r' && buffer_[i - 2] == '\n');
        if (!end) continue;
        buffer_.resize(i + 1);
        consumed = buffer_.size() - before;
        return parse();
    }
    scanned_ = buffer_.size();
    consumed = take;
    if (buffer_.size() > max_size_) return fail("response head too large");
    return Status::Again;
}

ResponseHead::Status ResponseHead::parse() {
    std::string_view rest = buffer_;
    std::string_view line = *next_line(rest);
    // status-line = HTTP-version SP status-code SP [ reason-phrase ]
    // (a missing reason phrase's SP is tolerated, as most clients do).
    if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' ||
        (line.size() > 12 && line[12] != ' '))
        return fail("malformed status line");
    if (line[7] != '0' && line[7] != '1') return fail("unsupported HTTP version");
    version_minor_ = line[7] - '0';
    keep_alive_ = version_minor_ >= 1;
    int status = 0;
    for (size_t i = 9; i < 12; ++i) {
        if (line[i] < '0' || line[i] > '9') return fail("malformed status code");
        status = status * 10 + (line[i] - '0');
    }
    if (status < 100) return fail("malformed status code");
    status_ = status;
    bool keep_alive_token = false;
    while (auto field = next_line(rest)) {
        if (field->empty()) break;
        // RFC 9112 §5.2: obsolete line folding may be rejected; §5.1: no
        // whitespace between the name and the colon.
        size_t colon = field->find(':');
        if (colon == 0 || colon == std::string_view::npos) return fail("malformed header field");
        std::string_view name = field->substr(0, colon);
        if (!std::all_of(name.begin(), name.end(), is_token_char))
            return fail("malformed header field name");
        std::string_view value = trim_ows(field->substr(colon + 1));
        if (value.find_first_of(std::string_view("\r\0", 2)) != std::string_view::npos)
            return fail("control character in a header field");
        headers_.push_back({name, value});
        if (ascii_iequals(name, "Content-Length")) {
            std::vector<std::string_view> values;
            split_tokens(value, values);
            if (values.empty()) return fail("empty Content-Length");
            for (std::string_view text : values) {
                uint64_t length = 0;
                auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
                if (ec != std::errc() || end != text.data() + text.size())
                    return fail("malformed Content-Length");
                if (content_length_ && *content_length_ != length)
                    return fail("conflicting Content-Length values");
                content_length_ = length;
            }
        } else if (ascii_iequals(name, "Transfer-Encoding")) {
            std::vector<std::string_view> codings;
            split_tokens(value, codings);
            transfer_coded_ = true;
            // §6.3: chunked only counts as the final coding.
            chunked_ = !codings.empty() && ascii_iequals(codings.back(), "chunked");
        } else if (ascii_iequals(name, "Connection")) {
            split_tokens(value, connection_tokens_);
        }
    }
    for (std::string_view token : connection_tokens_) {
        if (ascii_iequals(token, "close")) keep_alive_ = false;
        if (ascii_iequals(token, "keep-alive")) keep_alive_token = true;
        if (ascii_iequals(token, "upgrade")) upgrade_ = true;
    }
    if (version_minor_ == 0 && keep_alive_token &&
        std::none_of(connection_tokens_.begin(), connection_tokens_.end(),
                     [](std::string_view t) { return ascii_iequals(t, "close"); }))
        keep_alive_ = true;
    if (transfer_coded_) {
        // §6.3 3: Transfer-Encoding overrides Content-Length, and the
        // connection must not be reused (a smuggling attempt or a broken backend).
        if (content_length_) keep_alive_ = false;
        content_length_.reset();
        if (!chunked_) keep_alive_ = false; // ends at close
    }
    return Status::Done;
}

BodyFraming ResponseHead::framing(bool head_request) const {
    // RFC 9112 §6.3 1: no body for HEAD, 1xx, 204 and 304.
    if (head_request || status_ < 200 || status_ == 204 || status_ == 304) return BodyFraming::None;
    if (chunked_) return BodyFraming::Chunked;
    if (transfer_coded_) return BodyFraming::Close;
    if (content_length_) return BodyFraming::Length;
    return BodyFraming::Close;
}

bool ResponseHead::named_in_connection(std::string_view name) const {
    return std::any_of(connection_tokens_.begin(), connection_tokens_.end(),
                       [name](std::string_view token) { return ascii_iequals(token, name); });
}

} // namespace lepus::proxy
