// Http2Stream::complete_request (src/http/http2_stream.cc): the request an
// HTTP/2 head becomes, here its method (RFC 9110 §9.1, issue 37).
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
    // nghttp2 resets such a stream itself; this is the backstop.
    for (std::string_view method : {"", "PROP FIND", "PROP(FIND", "PROP\"FIND", "G\xc3\xa9T"}) {
        Http2Stream stream(1);
        EXPECT_EQ(complete(stream, method), 400) << method;
    }
}

} // namespace
} // namespace lepus
