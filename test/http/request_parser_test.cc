#include "http/request_parser.h"

#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lepus {
namespace {

using namespace std::literals;

// Everything a Request says, copied out so results from different buffers compare.
struct Snapshot {
    Method method = Method::Get;
    std::string method_text, target, path, query, host;
    int version_minor = 0;
    std::vector<std::pair<std::string, std::string>> headers;
    std::optional<uint64_t> content_length;
    bool chunked = false, keep_alive = false, expect_continue = false;
    std::vector<std::string> convenience;
    bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const Request& r) {
    Snapshot s;
    s.method = r.method;
    s.method_text = r.method_text;
    s.target = r.target;
    s.path = r.path;
    s.query = r.query;
    s.host = r.host;
    s.version_minor = r.version_minor;
    for (const Header& h : r.headers)
        s.headers.emplace_back(h.name, h.value);
    s.content_length = r.content_length;
    s.chunked = r.chunked;
    s.keep_alive = r.keep_alive;
    s.expect_continue = r.expect_continue;
    for (std::string_view v :
         {r.if_none_match, r.if_modified_since, r.if_match, r.if_unmodified_since, r.range,
          r.if_range, r.accept_encoding, r.referer, r.user_agent, r.content_type})
        s.convenience.emplace_back(v);
    return s;
}

struct Outcome {
    ParseStatus status = ParseStatus::Again;
    int error_status = 0;
    size_t head_size = 0;
    Snapshot request;
    bool operator==(const Outcome&) const = default;
};

Outcome outcome_of(const RequestParser& parser, ParseStatus status) {
    Outcome o;
    o.status = status;
    if (status == ParseStatus::Error) o.error_status = parser.error_status();
    if (status == ParseStatus::Done) {
        o.head_size = parser.head_size();
        o.request = snapshot(parser.request());
    }
    return o;
}

Outcome parse_whole(std::string_view raw, ParserLimits limits = {}) {
    RequestParser parser(limits);
    return outcome_of(parser, parser.parse(raw));
}

// The prefix, then the whole, each in a fresh heap buffer: the second call must not
// depend on the first buffer (ASan catches any stale pointer since it is freed).
Outcome parse_split(std::string_view raw, size_t split) {
    RequestParser parser;
    auto first = std::make_unique<std::vector<char>>(raw.begin(), raw.begin() + split);
    ParseStatus status = parser.parse(*first);
    if (status != ParseStatus::Again) return outcome_of(parser, status);
    first.reset();
    std::vector<char> second(raw.begin(), raw.end());
    return outcome_of(parser, parser.parse(second));
}

// One more byte per call, each call on a new copy of everything so far.
Outcome parse_bytewise(std::string_view raw) {
    RequestParser parser;
    ParseStatus status = ParseStatus::Again;
    std::vector<char> buffer;
    for (size_t n = 0; n <= raw.size() && status == ParseStatus::Again; ++n) {
        std::vector<char> moved(raw.begin(), raw.begin() + n);
        buffer.swap(moved); // the old copy is freed here
        status = parser.parse(buffer);
    }
    return outcome_of(parser, status);
}

std::string test_name(std::string_view text, size_t index) {
    std::string name = std::to_string(index) + "_";
    for (char c : text)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return name;
}

// ---------------------------------------------------------------- valid requests

struct ValidCase {
    const char* name;
    std::string_view raw;
    Method method;
    std::string_view path, query, host;
    int version_minor;
    bool keep_alive;
    std::optional<uint64_t> content_length = std::nullopt;
    bool chunked = false;
    bool expect_continue = false;
};

const ValidCase kValidCases[] = {
    {"simple GET", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", Method::Get, "/", "",
     "example.com", 1, true},
    {"path and query", "GET /a/b.html?x=1&y=2 HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get,
     "/a/b.html", "x=1&y=2", "h", 1, true},
    {"question mark in query", "GET /p?a?b/c HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/p",
     "a?b/c", "h", 1, true},
    {"empty query", "GET /p? HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/p", "", "h", 1, true},
    {"percent encoded path", "GET /a%20b%2F HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/a%20b%2F",
     "", "h", 1, true},
    {"sub-delims in path", "GET /a:b@c!$&'()*+,;=-._~ HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get,
     "/a:b@c!$&'()*+,;=-._~", "", "h", 1, true},
    {"HEAD", "HEAD /x HTTP/1.1\r\nHost: h\r\n\r\n", Method::Head, "/x", "", "h", 1, true},
    {"POST with length", "POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
     Method::Post, "/f", "", "h", 1, true, 5},
    {"PUT chunked", "PUT /f HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", Method::Put,
     "/f", "", "h", 1, true, std::nullopt, true},
    {"DELETE", "DELETE /f HTTP/1.1\r\nHost: h\r\n\r\n", Method::Delete, "/f", "", "h", 1, true},
    {"PATCH", "PATCH /f HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", Method::Patch, "/f", "",
     "h", 1, true, 0},
    {"TRACE", "TRACE / HTTP/1.1\r\nHost: h\r\n\r\n", Method::Trace, "/", "", "h", 1, true},
    {"OPTIONS path", "OPTIONS /x HTTP/1.1\r\nHost: h\r\n\r\n", Method::Options, "/x", "", "h", 1,
     true},
    {"OPTIONS asterisk", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", Method::Options, "*", "", "h", 1,
     true},
    {"CONNECT authority", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
     Method::Connect, "", "", "example.com:443", 1, true},
    {"absolute form wins over Host",
     "GET http://Example.com:8080/x?y HTTP/1.1\r\nHost: other\r\n\r\n", Method::Get, "/x", "y",
     "Example.com:8080", 1, true},
    {"absolute https without path", "GET HTTPS://h.example HTTP/1.1\r\nHost: h\r\n\r\n",
     Method::Get, "/", "", "h.example", 1, true},
    {"absolute without path with query", "GET http://h?q=1 HTTP/1.1\r\nHost: h\r\n\r\n",
     Method::Get, "/", "q=1", "h", 1, true},
    {"absolute IPv6 host", "GET http://[::1]:80/a HTTP/1.1\r\nHost: x\r\n\r\n", Method::Get, "/a",
     "", "[::1]:80", 1, true},
    {"HTTP/1.0 without Host closes", "GET / HTTP/1.0\r\n\r\n", Method::Get, "/", "", "", 0, false},
    {"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", Method::Get, "/",
     "", "", 0, true},
    {"HTTP/1.1 close", "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", Method::Get, "/",
     "", "h", 1, false},
    {"close wins in a list", "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, CLOSE\r\n\r\n",
     Method::Get, "/", "", "h", 1, false},
    {"other connection options", "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade,,te\r\n\r\n",
     Method::Get, "/", "", "h", 1, true},
    {"empty lines before request line", "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get,
     "/", "", "h", 1, true},
    {"bare LF before request line", "\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/", "",
     "h", 1, true},
    {"bare LF line endings", "GET /l HTTP/1.1\nHost: h\nX: y\n\n", Method::Get, "/l", "", "h", 1,
     true},
    {"mixed line endings", "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\n", Method::Get, "/", "", "h", 1,
     true},
    {"whitespace around value", "GET / HTTP/1.1\r\nHost: \t example.com \t \r\n\r\n", Method::Get,
     "/", "", "example.com", 1, true},
    {"no space after colon", "GET / HTTP/1.1\r\nHost:example.com\r\n\r\n", Method::Get, "/", "",
     "example.com", 1, true},
    {"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", Method::Get, "/", "", "", 1, true},
    {"Host with port", "GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", Method::Get, "/", "",
     "example.com:8080", 1, true},
    {"Host IPv6", "GET / HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n", Method::Get, "/", "",
     "[2001:db8::1]:443", 1, true},
    {"Host IPv4 empty port", "GET / HTTP/1.1\r\nHost: 10.0.0.1:\r\n\r\n", Method::Get, "/", "",
     "10.0.0.1:", 1, true},
    {"Host name in upper case", "GET / HTTP/1.1\r\nHOST: h\r\n\r\n", Method::Get, "/", "", "h", 1,
     true},
    {"expect continue",
     "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
     Method::Post, "/", "", "h", 1, true, 3, false, true},
    {"expect ignored in HTTP/1.0",
     "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", Method::Post, "/", "",
     "", 0, false, 3},
    {"identical length list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7, 7 ,7\r\n\r\n",
     Method::Post, "/", "", "h", 1, true, 7},
    {"identical length headers",
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\ncontent-length: 007\r\n\r\n", Method::Post,
     "/", "", "h", 1, true, 7},
    {"largest length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\n",
     Method::Post, "/", "", "h", 1, true, 9223372036854775807u},
    {"chunked any case", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ChUnKeD\r\n\r\n",
     Method::Post, "/", "", "h", 1, true, std::nullopt, true},
    {"chunked with empty elements",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: , chunked ,\r\n\r\n", Method::Post, "/", "",
     "h", 1, true, std::nullopt, true},
    {"obs-text in value", "GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9\r\n\r\n", Method::Get,
     "/", "", "h", 1, true},
    {"inner spaces kept", "GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: a b \t c\r\n\r\n", Method::Get,
     "/", "", "h", 1, true},
    {"unknown long header", "GET / HTTP/1.1\r\nHost: h\r\nX-!#$%&'*+-.^_`|~: v\r\n\r\n",
     Method::Get, "/", "", "h", 1, true},
    // Issue 14: what browsers send raw, accepted as nginx 1.22 accepts it.
    {"pipe caret braces backslash backtick in path",
     "GET /a|b^c{d}e\\f`g HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/a|b^c{d}e\\f`g", "", "h", 1,
     true},
    {"raw characters in query", "GET /s?q={\"a\":1}|^`\\ HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get,
     "/s", "q={\"a\":1}|^`\\", "h", 1, true},
    {"double quote in query", "GET /s?q=\"x\" HTTP/1.1\r\nHost: h\r\n\r\n", Method::Get, "/s",
     "q=\"x\"", "h", 1, true},
    {"raw characters in absolute-form path", "GET http://h/a{b}?c|d HTTP/1.1\r\nHost: x\r\n\r\n",
     Method::Get, "/a{b}", "c|d", "h", 1, true},
    // RFC 9110 §2.5: a higher 1.x minor version is read as 1.1 (issue 14).
    {"HTTP/1.2 read as 1.1", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", Method::Get, "/", "", "h", 1,
     true},
    {"HTTP/1.9 read as 1.1 needs Host", "GET / HTTP/1.9\r\nHost: h\r\nConnection: close\r\n\r\n",
     Method::Get, "/", "", "h", 1, false},
    {"HTTP/1.2 chunked", "POST / HTTP/1.2\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
     Method::Post, "/", "", "h", 1, true, std::nullopt, true},
    // RFC 9110 §9.1: any token is a method; WebDAV's reach the backends (issue 37).
    {"PROPFIND", "PROPFIND /dav/a/ HTTP/1.1\r\nHost: h\r\nDepth: 1\r\n\r\n", Method::Extension,
     "/dav/a/", "", "h", 1, true},
    {"MKCOL with a body", "MKCOL /dav/b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab",
     Method::Extension, "/dav/b", "", "h", 1, true, 2},
    {"a token of symbols", "M-SEARCH!#$%&'*+.^_`|~ /x HTTP/1.1\r\nHost: h\r\n\r\n",
     Method::Extension, "/x", "", "h", 1, true},
    // Methods are case-sensitive: "get" is another method than GET.
    {"lowercase method", "get / HTTP/1.1\r\nHost: h\r\n\r\n", Method::Extension, "/", "", "h", 1,
     true},
};

class ValidRequest : public testing::TestWithParam<ValidCase> {};

TEST_P(ValidRequest, ParsesFields) {
    const ValidCase& c = GetParam();
    RequestParser parser;
    ASSERT_EQ(parser.parse(c.raw), ParseStatus::Done) << parser.error_reason();
    const Request& r = parser.request();
    EXPECT_EQ(r.method, c.method);
    if (c.method == Method::Extension) // its name only in method_text, as sent
        EXPECT_EQ(r.method_text, c.raw.substr(0, c.raw.find(' ')));
    else
        EXPECT_EQ(r.method_text, method_name(c.method));
    EXPECT_EQ(r.path, c.path);
    EXPECT_EQ(r.query, c.query);
    EXPECT_EQ(r.host, c.host);
    EXPECT_EQ(r.version_minor, c.version_minor);
    EXPECT_EQ(r.keep_alive, c.keep_alive);
    EXPECT_EQ(r.content_length, c.content_length);
    EXPECT_EQ(r.chunked, c.chunked);
    EXPECT_EQ(r.expect_continue, c.expect_continue);
    // The head ends with its empty line; the target is the request line's second word.
    std::string_view head = c.raw.substr(0, parser.head_size());
    EXPECT_TRUE(head.ends_with("\n\n") || head.ends_with("\n\r\n")) << head;
    std::string_view line = head.substr(head.find_first_not_of("\r\n"));
    line = line.substr(0, line.find_first_of("\r\n"));
    EXPECT_EQ(r.target, line.substr(line.find(' ') + 1, line.rfind(' ') - line.find(' ') - 1));
    EXPECT_EQ(r.has_body(), c.chunked || c.content_length.value_or(0) > 0);
}

INSTANTIATE_TEST_SUITE_P(Table, ValidRequest, testing::ValuesIn(kValidCases),
                         [](const auto& info) { return test_name(info.param.name, info.index); });

// ---------------------------------------------------------------- invalid requests

struct ErrorCase {
    const char* name;
    std::string_view raw;
    int status;
};

const ErrorCase kErrorCases[] = {
    // Request line syntax (RFC 9112 §3).
    {"two spaces after method", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"two spaces before version", "GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"leading space", " GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"trailing space", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
    {"tab separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"tab before version", "GET /\tHTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"empty target", "GET  HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"HTTP/0.9 line", "GET /\r\n\r\n", 400},
    {"missing version", "GET / \r\n\r\n", 400},
    {"lowercase version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400},
    {"short version", "GET / HTTP/1\r\nHost: h\r\n\r\n", 400},
    {"long version", "GET / HTTP/1.1.1\r\nHost: h\r\n\r\n", 400},
    {"two digit major", "GET / HTTP/11.1\r\nHost: h\r\n\r\n", 400},
    {"letters in version", "GET / HTTP/a.b\r\nHost: h\r\n\r\n", 400},
    {"version without dot", "GET / HTTP/1-1\r\nHost: h\r\n\r\n", 400},
    {"bare CR in request line", "GET / HTTP/1.1\rHost: h\r\n\r\n", 400},
    {"bare CR before request line", "\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"invalid method byte", "G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"method with NUL", "GE\0T / HTTP/1.1\r\nHost: h\r\n\r\n"sv, 400},
    {"method then CRLF", "GET\r\nHost: h\r\n\r\n", 400},
    // Request target (RFC 9112 §3.2, RFC 3986).
    {"fragment", "GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"space inside target", "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"control byte in target", "GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"NUL in target", "GET /a\0 HTTP/1.1\r\nHost: h\r\n\r\n"sv, 400},
    {"DEL in target", "GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"high byte in target", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"double quote", "GET /a\"b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"less than", "GET /a<b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"greater than", "GET /a>b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"double quote before a later query", "GET /a\"b?c HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"less than in query", "GET /a?x=<b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"greater than in query", "GET /a?x=b> HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"fragment after query", "GET /a?x=1#f HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"control byte in query", "GET /a?x=\x1b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"high byte in query", "GET /a?x=\xff HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"tab in query", "GET /a?x=\t HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"pipe in absolute-form host", "GET http://a|b/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"brace in Host", "GET / HTTP/1.1\r\nHost: a{b\r\n\r\n", 400},
    {"brackets in path", "GET /a[b] HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"brackets in query", "GET /a?[b] HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"bad percent", "GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"truncated percent", "GET /a%2 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"bad percent in query", "GET /a?x=%g0 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"asterisk with GET", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"authority form with GET", "GET example.com:80 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"CONNECT with origin form", "CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"CONNECT without port", "CONNECT example.com HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"CONNECT with absolute form", "CONNECT http://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"unknown scheme", "GET ftp://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"absolute form empty host", "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"absolute form userinfo", "GET http://user@h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"absolute form port too big", "GET http://h:65536/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"absolute form bad port", "GET http://h:8o/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"relative path", "GET a/b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    // Host (RFC 9112 §3.2).
    {"HTTP/1.1 without Host", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 400},
    {"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},
    {"two Host fields in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400},
    {"Host with space", "GET / HTTP/1.1\r\nHost: exa mple.com\r\n\r\n", 400},
    {"Host with slash", "GET / HTTP/1.1\r\nHost: h/x\r\n\r\n", 400},
    {"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", 400},
    {"Host unclosed IPv6", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400},
    {"Host bad port", "GET / HTTP/1.1\r\nHost: h:http\r\n\r\n", 400},
    {"Host port only", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400},
    {"Host list", "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", 400},
    // Field syntax (RFC 9112 §5).
    {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
    {"tab before colon", "GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400},
    {"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400},
    {"obs-fold with tab", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400},
    {"whitespace before first field", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400},
    {"empty field name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400},
    {"invalid byte in name", "GET / HTTP/1.1\r\nHost: h\r\nX(y): v\r\n\r\n", 400},
    {"missing colon", "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400},
    {"high byte in name", "GET / HTTP/1.1\r\nHost: h\r\nX\xc3\xa9: v\r\n\r\n", 400},
    {"NUL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n"sv, 400},
    {"bare CR in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", 400},
    {"control byte in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n", 400},
    {"DEL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400},
    {"bare CR ending the head", "GET / HTTP/1.1\r\nHost: h\r\n\rX", 400},
    // Framing (RFC 9112 §6).
    {"length not a number", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", 400},
    {"negative length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
    {"length with plus", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", 400},
    {"hex length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", 400},
    {"two numbers in length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5 5\r\n\r\n", 400},
    {"empty length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", 400},
    {"differing length list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1,2\r\n\r\n", 400},
    {"empty element in length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1,,1\r\n\r\n", 400},
    {"differing length fields",
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
    {"length overflow",
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
    {"length above 2^63-1",
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775808\r\n\r\n", 400},
    {"length and chunked",
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"chunked and length",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
    {"transfer encoding in 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"gzip only", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
    {"chunked not last", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
     400},
    {"chunked twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
     400},
    {"chunked then gzip field",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
     400},
    {"invalid coding", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chu nked\r\n\r\n", 400},
    // RFC 9112 §7: chunked has no parameters (issue 14).
    {"chunked with a parameter",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;x=y\r\n\r\n", 400},
    {"chunked with a spaced parameter",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked ; q=1\r\n\r\n", 400},
    {"chunked with an empty parameter",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;\r\n\r\n", 400},
    {"chunked with a parameter after gzip",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked;a=b\r\n\r\n", 400},
    {"empty transfer encoding", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 400},
    // 501: well-formed but not implemented.
    // An extension method takes no asterisk-form (RFC 9112 §3.2.4: OPTIONS only).
    {"extension method with asterisk", "M-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"gzip then chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     501},
    {"deflate field then chunked",
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: "
     "chunked\r\n\r\n",
     501},
    // 505: well-formed but another version.
    {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
    {"HTTP/0.9 version", "GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505},
    {"HTTP/3.0", "GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505},
    {"HTTP/2.1", "GET / HTTP/2.1\r\nHost: h\r\n\r\n", 505},
    {"HTTP/1.2 without Host", "GET / HTTP/1.2\r\n\r\n", 400},
    {"HTTP/1.10", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400},
};

class InvalidRequest : public testing::TestWithParam<ErrorCase> {};

TEST_P(InvalidRequest, FailsWithStatus) {
    const ErrorCase& c = GetParam();
    RequestParser parser;
    ASSERT_EQ(parser.parse(c.raw), ParseStatus::Error);
    EXPECT_EQ(parser.error_status(), c.status) << parser.error_reason();
    EXPECT_STRNE(parser.error_reason(), "");
    // An error is final, even if more bytes arrive.
    EXPECT_EQ(parser.parse(c.raw), ParseStatus::Error);
}

INSTANTIATE_TEST_SUITE_P(Table, InvalidRequest, testing::ValuesIn(kErrorCases),
                         [](const auto& info) { return test_name(info.param.name, info.index); });

// ---------------------------------------------------------------- split anywhere

// Every table entry, cut at every byte offset (with the buffer moving between calls),
// gives the outcome of the one-call parse.
TEST(RequestParserSplit, EveryOffsetOfEveryCaseMatchesWholeParse) {
    std::vector<std::string_view> inputs;
    for (const ValidCase& c : kValidCases)
        inputs.push_back(c.raw);
    for (const ErrorCase& c : kErrorCases)
        inputs.push_back(c.raw);
    for (std::string_view raw : inputs) {
        Outcome whole = parse_whole(raw);
        for (size_t split = 0; split <= raw.size(); ++split)
            ASSERT_EQ(parse_split(raw, split), whole) << "split at " << split << " of " << raw;
        ASSERT_EQ(parse_bytewise(raw), whole) << raw;
    }
}

const std::string kBrowserGet =
    "GET /static/app.js?v=3 HTTP/1.1\r\n"
    "Host: www.example.com\r\n"
    "Connection: keep-alive\r\n"
    "sec-ch-ua: \"Chromium\";v=\"120\", \"Not?A_Brand\";v=\"24\"\r\n"
    "sec-ch-ua-mobile: ?0\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36\r\n"
    "Accept: */*\r\n"
    "Referer: https://www.example.com/index.html\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "If-None-Match: \"5f2a-1a2b\"\r\n"
    "If-Modified-Since: Tue, 10 Oct 2023 07:28:00 GMT\r\n"
    "\r\n";

TEST(RequestParserSplit, BrowserRequestFieldsSurviveEverySplit) {
    Outcome whole = parse_whole(kBrowserGet);
    ASSERT_EQ(whole.status, ParseStatus::Done);
    EXPECT_EQ(whole.head_size, kBrowserGet.size());
    EXPECT_EQ(whole.request.headers.size(), 11u);
    EXPECT_EQ(whole.request.headers[3],
              std::make_pair(std::string("sec-ch-ua-mobile"), std::string("?0")));
    EXPECT_EQ(whole.request.convenience[0], "\"5f2a-1a2b\"");                 // If-None-Match
    EXPECT_EQ(whole.request.convenience[1], "Tue, 10 Oct 2023 07:28:00 GMT"); // If-Modified-Since
    EXPECT_EQ(whole.request.convenience[6], "gzip, deflate, br");             // Accept-Encoding
    EXPECT_EQ(whole.request.convenience[7], "https://www.example.com/index.html"); // Referer
    EXPECT_TRUE(whole.request.convenience[8].starts_with("Mozilla/5.0"));          // User-Agent
    for (size_t split = 0; split <= kBrowserGet.size(); ++split)
        ASSERT_EQ(parse_split(kBrowserGet, split), whole) << split;
    EXPECT_EQ(parse_bytewise(kBrowserGet), whole);
}

TEST(RequestParserSplit, PrefixOfAValidRequestIsAgain) {
    for (size_t n = 0; n < kBrowserGet.size(); ++n) {
        RequestParser parser;
        ASSERT_EQ(parser.parse(std::string_view(kBrowserGet).substr(0, n)), ParseStatus::Again)
            << n;
    }
}

// ---------------------------------------------------------------- fields

TEST(RequestParserFields, ConvenienceFieldsAndFirstOccurrence) {
    std::string raw = "GET / HTTP/1.1\r\nhost: h\r\nif-match: \"a\"\r\nIf-Unmodified-Since: d1\r\n"
                      "Range: bytes=0-9\r\nRange: bytes=5-\r\nIf-Range: \"e\"\r\n"
                      "Content-Type: text/plain\r\nIF-NONE-MATCH: *\r\n\r\n";
    RequestParser parser;
    ASSERT_EQ(parser.parse(raw), ParseStatus::Done);
    const Request& r = parser.request();
    EXPECT_EQ(r.if_match, "\"a\"");
    EXPECT_EQ(r.if_unmodified_since, "d1");
    EXPECT_EQ(r.range, "bytes=0-9");
    EXPECT_EQ(r.if_range, "\"e\"");
    EXPECT_EQ(r.content_type, "text/plain");
    EXPECT_EQ(r.if_none_match, "*");
    EXPECT_EQ(r.headers.size(), 8u);
    EXPECT_EQ(r.headers[0].name, "host"); // case preserved
    EXPECT_TRUE(r.referer.empty());
    EXPECT_TRUE(r.user_agent.empty());
}

TEST(RequestParserFields, EmptyValueAndHeadSizeWithBody) {
    std::string raw = "POST /u HTTP/1.1\r\nHost: h\r\nX-Empty:   \r\nContent-Length: 4\r\n\r\nbody";
    RequestParser parser;
    ASSERT_EQ(parser.parse(raw), ParseStatus::Done);
    EXPECT_EQ(parser.request().headers[1].name, "X-Empty");
    EXPECT_EQ(parser.request().headers[1].value, "");
    EXPECT_EQ(raw.substr(parser.head_size()), "body");
    EXPECT_TRUE(parser.request().has_body());
    EXPECT_FALSE(parser.request().is_head());
}

TEST(RequestParserFields, ParseAfterDoneIsIdempotent) {
    RequestParser parser;
    ASSERT_EQ(parser.parse(kBrowserGet), ParseStatus::Done);
    ASSERT_EQ(parser.parse(kBrowserGet), ParseStatus::Done);
    EXPECT_EQ(parser.request().path, "/static/app.js");
}

// ---------------------------------------------------------------- pipelining

TEST(RequestParserPipeline, ParsesRequestsBackToBack) {
    std::string stream = "\r\nGET /one HTTP/1.1\r\nHost: a\r\n\r\n"
                         "POST /two HTTP/1.1\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello"
                         "\r\n" // the stray CRLF some clients send after a body
                         "HEAD /three?x HTTP/1.0\r\n\r\n"
                         "GET /four HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n";
    struct Expected {
        std::string_view path, host;
        bool keep_alive;
    };
    const Expected expected[] = {
        {"/one", "a", true}, {"/two", "b", true}, {"/three", "", false}, {"/four", "d", false}};
    RequestParser parser;
    size_t offset = 0;
    for (const Expected& e : expected) {
        parser.reset();
        std::string_view rest = std::string_view(stream).substr(offset);
        ASSERT_EQ(parser.parse(rest), ParseStatus::Done) << parser.error_reason();
        EXPECT_EQ(parser.request().path, e.path);
        EXPECT_EQ(parser.request().host, e.host);
        EXPECT_EQ(parser.request().keep_alive, e.keep_alive);
        offset += parser.head_size() + parser.request().content_length.value_or(0);
    }
    EXPECT_EQ(offset, stream.size());
}

TEST(RequestParserPipeline, ResetClearsEveryField) {
    RequestParser parser;
    std::string first = "POST /a?q HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nRange: bytes=1-\r\n"
                        "Expect: 100-continue\r\nConnection: close\r\n\r\n";
    ASSERT_EQ(parser.parse(first), ParseStatus::Done);
    parser.reset();
    std::string second = "GET /b HTTP/1.1\r\nHost: b\r\n\r\n";
    ASSERT_EQ(parser.parse(second), ParseStatus::Done);
    EXPECT_EQ(snapshot(parser.request()), parse_whole(second).request);
    EXPECT_FALSE(parser.request().content_length.has_value());
    EXPECT_TRUE(parser.request().range.empty());
    EXPECT_TRUE(parser.request().keep_alive);
    EXPECT_FALSE(parser.request().expect_continue);
    parser.reset();
    ASSERT_EQ(parser.parse("BREW / HTTP/2.0\r\n"sv), ParseStatus::Error);
    parser.reset();
    EXPECT_EQ(parser.parse(second), ParseStatus::Done); // an error does not stick past reset
}

// ---------------------------------------------------------------- limits

TEST(RequestParserLimits, RequestLineAtTheLimitPassesOneMoreIs414) {
    ParserLimits limits;
    limits.max_request_line = 64;
    std::string line = "GET /" + std::string(64 - 14, 'a') + " HTTP/1.1";
    ASSERT_EQ(line.size(), 64u);
    EXPECT_EQ(parse_whole(line + "\r\nHost: h\r\n\r\n", limits).status, ParseStatus::Done);
    line.insert(5, "b");
    EXPECT_EQ(parse_whole(line + "\r\nHost: h\r\n\r\n", limits).error_status, 414);
    EXPECT_EQ(parse_whole(line + "\nHost: h\n\n", limits).error_status, 414);
}

TEST(RequestParserLimits, LongRequestLineIsRefusedBeforeItEnds) {
    std::string partial = "GET /" + std::string(9000, 'a'); // no end of line yet
    RequestParser parser;
    ASSERT_EQ(parser.parse(partial), ParseStatus::Error);
    EXPECT_EQ(parser.error_status(), 414);
    RequestParser in_method;
    ASSERT_EQ(in_method.parse(std::string(9000, 'G')), ParseStatus::Error);
    EXPECT_EQ(in_method.error_status(), 414);
}

TEST(RequestParserLimits, EndlessEmptyLinesAre400) {
    std::string crlfs;
    for (int i = 0; i < 5000; ++i)
        crlfs += "\r\n";
    RequestParser parser;
    ASSERT_EQ(parser.parse(crlfs), ParseStatus::Error);
    EXPECT_EQ(parser.error_status(), 400);
}

// Found by test/fuzz/request_parser_fuzz.cc: the bound on empty lines held only when a
// read ended inside them; arriving together with the request line they were accepted.
TEST(RequestParserLimits, EmptyLinesBeforeARequestLineAreBoundedInOneRead) {
    std::string raw = std::string(8193, '\n') + "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    RequestParser whole;
    ASSERT_EQ(whole.parse(raw), ParseStatus::Error);
    EXPECT_EQ(whole.error_status(), 400);
    std::string at_limit = std::string(8192, '\n') + "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    RequestParser ok;
    EXPECT_EQ(ok.parse(at_limit), ParseStatus::Done);
}

TEST(RequestParserLimits, HeaderCountAtTheLimitPassesOneMoreIs431) {
    std::string raw = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 100; ++i)
        raw += "X-" + std::to_string(i) + ": v\r\n";
    EXPECT_EQ(parse_whole(raw + "\r\n").status, ParseStatus::Error); // 100 fields, no Host: 400
    EXPECT_EQ(parse_whole(raw + "\r\n").error_status, 400);
    std::string with_host = "GET / HTTP/1.1\r\nHost: h\r\n";
    for (int i = 0; i < 99; ++i)
        with_host += "X-" + std::to_string(i) + ": v\r\n";
    Outcome ok = parse_whole(with_host + "\r\n");
    ASSERT_EQ(ok.status, ParseStatus::Done);
    EXPECT_EQ(ok.request.headers.size(), 100u);
    EXPECT_EQ(parse_whole(with_host + "X-last: v\r\n\r\n").error_status, 431);
}

TEST(RequestParserLimits, HeaderBlockTooLargeIs431WhileReceiving) {
    ParserLimits limits;
    limits.max_header_block = 100;
    std::string head = "GET / HTTP/1.1\r\n";
    std::string block = "Host: h\r\nX: " + std::string(100 - 16, 'v') + "\r\n\r\n";
    ASSERT_EQ(block.size(), 100u);
    EXPECT_EQ(parse_whole(head + block, limits).status, ParseStatus::Done);
    std::string bigger = "Host: h\r\nX: " + std::string(100 - 16 + 1, 'v') + "\r\n\r\n";
    EXPECT_EQ(parse_whole(head + bigger, limits).error_status, 431);
    // One long value with no end in sight.
    RequestParser parser(limits);
    ASSERT_EQ(parser.parse(head + "X: " + std::string(200, 'v')), ParseStatus::Error);
    EXPECT_EQ(parser.error_status(), 431);
}

TEST(RequestParserLimits, SmallHeaderArrayFromLimits) {
    ParserLimits limits;
    limits.max_headers = 2;
    EXPECT_EQ(parse_whole("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n", limits).status,
              ParseStatus::Done);
    EXPECT_EQ(parse_whole("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits).error_status,
              431);
}

} // namespace
} // namespace lepus
