#include "proxy/response_head.h"

#include <gtest/gtest.h>
#include <string>
#include <string_view>

namespace lepus::proxy {
namespace {

ResponseHead::Status feed_all(ResponseHead& head, std::string_view text, size_t& consumed) {
    return head.feed({text.data(), text.size()}, consumed);
}

TEST(ResponseHead, ParsesStatusFieldsAndLength) {
    ResponseHead head;
    std::string text = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhello";
    size_t consumed = 0;
    ASSERT_EQ(feed_all(head, text, consumed), ResponseHead::Status::Done);
    EXPECT_EQ(consumed, text.size() - 5); // the body is left
    EXPECT_EQ(head.status(), 201);
    ASSERT_EQ(head.headers().size(), 2u);
    EXPECT_EQ(head.headers()[1].value, "b");
    EXPECT_EQ(head.content_length(), 5u);
    EXPECT_EQ(head.framing(false), BodyFraming::Length);
    EXPECT_EQ(head.framing(true), BodyFraming::None);
    EXPECT_TRUE(head.keep_alive());
}

TEST(ResponseHead, ResumesAtAnyByte) {
    std::string text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    ResponseHead head;
    ResponseHead::Status status = ResponseHead::Status::Again;
    size_t total = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        size_t consumed = 0;
        status = feed_all(head, std::string_view(text).substr(i, 1), consumed);
        total += consumed;
        if (i + 1 < text.size()) {
            ASSERT_EQ(status, ResponseHead::Status::Again) << i;
        }
    }
    EXPECT_EQ(status, ResponseHead::Status::Done);
    EXPECT_EQ(total, text.size());
    EXPECT_EQ(head.framing(false), BodyFraming::Chunked);
}

TEST(ResponseHead, FramingRules) {
    struct Case {
        std::string_view text;
        BodyFraming framing;
        bool keep_alive;
    } cases[] = {
        {"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", BodyFraming::None, true},
        {"HTTP/1.1 304 Not Modified\r\n\r\n", BodyFraming::None, true},
        {"HTTP/1.1 200 OK\r\n\r\n", BodyFraming::Close, true},
        {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", BodyFraming::Length, false},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
         BodyFraming::Length, true},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", BodyFraming::Length,
         false},
        // RFC 9112 §6.3: Transfer-Encoding wins over Content-Length, and the
        // connection is not reused after.
        {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n",
         BodyFraming::Chunked, false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", BodyFraming::Close, false},
        {"HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n", BodyFraming::Length, true},
        {"HTTP/1.1 200\nContent-Length: 0\n\n", BodyFraming::Length, true},
    };
    for (const Case& c : cases) {
        ResponseHead head;
        size_t consumed = 0;
        ASSERT_EQ(feed_all(head, c.text, consumed), ResponseHead::Status::Done) << c.text;
        EXPECT_EQ(head.framing(false), c.framing) << c.text;
        EXPECT_EQ(head.keep_alive(), c.keep_alive) << c.text;
    }
}

TEST(ResponseHead, RefusesMalformedHeads) {
    for (std::string_view text : {
             "SPEAKING SOMETHING ELSE\r\n\r\n",
             "HTTP/2 200 OK\r\n\r\n",
             "HTTP/1.1 2x0 OK\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
             "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
             "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
             "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
         }) {
        ResponseHead head;
        size_t consumed = 0;
        EXPECT_EQ(feed_all(head, text, consumed), ResponseHead::Status::Error) << text;
    }
}

TEST(ResponseHead, HeadOverTheLimitIsAnError) {
    ResponseHead head(64);
    std::string text = "HTTP/1.1 200 OK\r\nX-Big: " + std::string(100, 'b') + "\r\n\r\n";
    size_t consumed = 0;
    EXPECT_EQ(feed_all(head, text, consumed), ResponseHead::Status::Error);
    EXPECT_STREQ(head.error(), "response head too large");
}

TEST(ResponseHead, ConnectionNamedFields) {
    ResponseHead head;
    size_t consumed = 0;
    ASSERT_EQ(feed_all(head, "HTTP/1.1 200 OK\r\nConnection: X-Secret, close\r\n\r\n", consumed),
              ResponseHead::Status::Done);
    EXPECT_TRUE(head.named_in_connection("x-secret"));
    EXPECT_FALSE(head.named_in_connection("X-Other"));
    EXPECT_FALSE(head.keep_alive());
}

} // namespace
} // namespace lepus::proxy
