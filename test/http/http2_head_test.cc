// The HTTP/2 engine's response heads: the handlers' HTTP/1.1 head text as an
// HTTP/2 header block (":status" first, names lowercased, connection fields
// dropped, values trimmed), the scratch buffer reused from one head to the
// next, and which answers carry no body (RFC 9110 §6.4.1).
#include "http/detail/http2_head.h"
#include "http/exchange.h"
#include "http/response.h"

#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

namespace lepus::detail {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields as_pairs(const std::vector<nghttp2_nv>& fields) {
    Fields pairs;
    for (const nghttp2_nv& field : fields)
        pairs.emplace_back(std::string(reinterpret_cast<const char*>(field.name), field.namelen),
                           std::string(reinterpret_cast<const char*>(field.value), field.valuelen));
    return pairs;
}

TEST(Http2Head, StatusFirstNamesLowercasedConnectionFieldsDropped) {
    std::string text;
    std::vector<nghttp2_nv> fields;
    head_to_fields(200,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: keep-alive\r\n"
                   "Keep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nX-Custom:  a b \t\r\n"
                   "TE: trailers\r\nPROXY-CONNECTION: close\r\nUpgrade: h2c\r\nTEE: 1\r\n"
                   "Content-Length: 12\r\n\r\n",
                   text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "200"},
                                        {"content-type", "text/html"},
                                        {"x-custom", "a b"},
                                        {"tee", "1"},
                                        {"content-length", "12"}}));
}

TEST(Http2Head, ScratchSpaceIsReusedWithoutStaleFields) {
    std::string text;
    std::vector<nghttp2_nv> fields;
    head_to_fields(200, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", text, fields);
    head_to_fields(404, "HTTP/1.1 404 Not Found\r\nServer: lepus\r\n\r\n", text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "404"}, {"server", "lepus"}}));
}

TEST(Http2Head, OnlyCarriageReturnLineFeedEndsALine) {
    std::string text;
    std::vector<nghttp2_nv> fields;
    head_to_fields(200, "HTTP/1.1 200 OK\r\nX-A: 1\r2\r\nX-B: 3\r\n\r\n", text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "200"}, {"x-a", "1\r2"}, {"x-b", "3"}}));
    // A head cut before its blank line: its last, unterminated line is not a field.
    head_to_fields(200, "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-B: 3", text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "200"}, {"x-a", "1"}}));
    head_to_fields(200, "HTTP/1.1 200 OK", text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "200"}}));
}

TEST(Http2Head, LinesWithoutAColonAreSkipped) {
    std::string text;
    std::vector<nghttp2_nv> fields;
    head_to_fields(502, "HTTP/1.1 502 Bad Gateway\r\nnot a field\r\nVary: Accept\r\n\r\n", text,
                   fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "502"}, {"vary", "Accept"}}));
}

// is_backend_own_field is exchange.h's, shared with the HTTP/1.1 engine.
TEST(Http2Head, BackendConnectionFieldsAreLepusOwn) {
    for (const char* name : {"connection", "Content-Length", "DATE", "server", "Transfer-Encoding"})
        EXPECT_TRUE(lepus::is_backend_own_field(name)) << name;
    for (const char* name : {"Content-Type", "Set-Cookie", "Location", "Cache-Control"})
        EXPECT_FALSE(lepus::is_backend_own_field(name)) << name;
}

// response.h's, shared by both engines.
TEST(Http2Head, NoBodyForHeadInformational204And304) {
    Request get;
    Request head;
    head.method = Method::Head;
    EXPECT_FALSE(lepus::response_has_no_body(get, 200));
    EXPECT_FALSE(lepus::response_has_no_body(get, 404));
    EXPECT_TRUE(lepus::response_has_no_body(head, 200));
    EXPECT_TRUE(lepus::response_has_no_body(get, 103));
    EXPECT_TRUE(lepus::response_has_no_body(get, 204));
    EXPECT_TRUE(lepus::response_has_no_body(get, 304));
}

} // namespace
} // namespace lepus::detail
