// Http2Stream::complete_request (src/http/http2_stream.cc): the request an
// HTTP/2 head becomes, here its method (RFC 9110 §9.1, issue 37); and
// add_field's checks of each field (RFC 9113 §8.2, §8.3), which nghttp2 made
// before lepus had its own HTTP/2 code (issue 38).
#include "http/detail/http2_stream.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

int complete(Http2Stream& stream, std::string_view method) {
    stream.method = stream.keep(method);
    stream.path = stream.keep("/dav/files/a/");
    stream.authority = stream.keep("example.com");
    stream.has_authority = true;
    stream.request_ended = true;
    return stream.complete_request();
}

TEST(Http2StreamMethod, KnownMethodsKeepTheirEnum) {
    Http2Stream stream(1);
    ASSERT_EQ(complete(stream, "GET"), 0);
    EXPECT_EQ(stream.request.method, Method::Get);
    EXPECT_EQ(stream.request.method_text, "GET");
    EXPECT_EQ(stream.request.host, "example.com");
    Http2Stream head(3);
    ASSERT_EQ(complete(head, "HEAD"), 0);
    EXPECT_TRUE(head.request.is_head());
}

TEST(Http2StreamMethod, AnyTokenIsAnExtensionMethod) {
    for (std::string_view method : {"PROPFIND", "MKCOL", "M-SEARCH", "get", "X!#$%&'*+.^_`|~"}) {
        Http2Stream stream(1);
        ASSERT_EQ(complete(stream, method), 0) << method;
        EXPECT_EQ(stream.request.method, Method::Extension);
        EXPECT_EQ(stream.request.method_text, method);
        EXPECT_EQ(stream.request.path, "/dav/files/a/");
    }
}

TEST(Http2StreamMethod, AMethodThatIsNoTokenIs400) {
    // Answered 400, as HTTP/1.1 answers it (RFC 9113 §8.1.1 allows a response before the reset).
    for (std::string_view method : {"", "PROP FIND", "PROP(FIND", "PROP\"FIND", "G\xc3\xa9T"}) {
        Http2Stream stream(1);
        EXPECT_EQ(complete(stream, method), 400) << method;
    }
}

bool accepts(std::string_view name, std::string_view value) {
    Http2Stream stream(1);
    return stream.add_field(name, value);
}

TEST(Http2StreamFields, ValuesWithNulCrOrLfAnywhereAreMalformed) {
    // Every position, in values of several lengths.
    for (size_t length : {1, 7, 8, 9, 16, 23, 40}) {
        for (size_t at = 0; at < length; ++at) {
            for (char bad : {'\0', '\r', '\n'}) {
                std::string value(length, 'v');
                value[at] = bad;
                EXPECT_FALSE(accepts("x-a", value)) << length << " " << at << " " << int(bad);
            }
        }
        EXPECT_TRUE(accepts("x-a", std::string(length, 'v')));
    }
    // Bytes near them are fine.
    EXPECT_TRUE(accepts("user-agent", "Mozilla/5.0 (X11; Linux x86_64) \x8d\x0e\x0b\x01\xff"));
}

TEST(Http2StreamFields, NamesAndValuesOutsideTheRulesAreMalformed) {
    EXPECT_FALSE(accepts("x-a", " leading"));
    EXPECT_FALSE(accepts("x-a", "trailing\t"));
    EXPECT_TRUE(accepts("x-a", ""));
    EXPECT_FALSE(accepts("X-Capitals", "1")); // §8.2.1: lowercase
    EXPECT_FALSE(accepts("x a", "1"));
    EXPECT_FALSE(accepts("", "1"));
    for (std::string_view name :
         {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"})
        EXPECT_FALSE(accepts(name, "x")) << name; // §8.2.2
    EXPECT_FALSE(accepts("te", "gzip"));
    EXPECT_TRUE(accepts("te", "trailers"));
    EXPECT_FALSE(accepts(":status", "200")); // §8.3: a response's
    EXPECT_FALSE(accepts(":unknown", "x"));
    EXPECT_FALSE(accepts(":path", ""));
    EXPECT_FALSE(accepts("content-length", "12x"));
    // Named by HPACK's static table (its index given): transfer-encoding (57) is still refused.
    Http2Stream stream(1);
    EXPECT_TRUE(stream.add_field("user-agent", "curl", 58));
    EXPECT_FALSE(stream.add_field("transfer-encoding", "chunked", 57));
    // Its name is the static table's, not a copy; the request sees it as any other.
    stream.method = stream.keep("GET");
    stream.path = stream.keep("/");
    stream.request_ended = true;
    ASSERT_EQ(stream.complete_request(), 0);
    ASSERT_EQ(stream.request.headers.size(), 1u);
    EXPECT_EQ(stream.request.headers[0].name, "user-agent");
    EXPECT_EQ(stream.request.headers[0].value, "curl");
}

TEST(Http2StreamFields, PseudoFieldsComeFirstOnceAndCompleteTheHead) {
    Http2Stream stream(1);
    EXPECT_TRUE(stream.add_field(":method", "GET"));
    EXPECT_FALSE(stream.head_complete());
    EXPECT_TRUE(stream.add_field(":scheme", "https"));
    EXPECT_TRUE(stream.add_field(":path", "/"));
    EXPECT_TRUE(stream.head_complete());
    EXPECT_FALSE(stream.add_field(":path", "/again"));
    EXPECT_TRUE(stream.add_field("accept", "*/*"));
    EXPECT_FALSE(stream.add_field(":authority", "late"));
    Http2Stream connect(3);
    EXPECT_TRUE(connect.add_field(":method", "CONNECT"));
    EXPECT_TRUE(connect.add_field(":authority", "example.com:443"));
    EXPECT_TRUE(connect.head_complete());
}

TEST(Http2StreamFields, RfcPriorityFieldSetsUrgencyAndIncremental) {
    Http2Stream stream(1);
    EXPECT_EQ(stream.urgency, 3);
    EXPECT_TRUE(stream.add_field("priority", "u=1, i"));
    EXPECT_EQ(stream.urgency, 1);
    EXPECT_TRUE(stream.incremental);
    Http2Stream other(3);
    EXPECT_TRUE(other.add_field("priority", "u=9, foo=bar"));
    EXPECT_EQ(other.urgency, 3); // out of range: ignored (RFC 9218 §4.1)
    EXPECT_FALSE(other.incremental);
}

} // namespace
} // namespace lepus
