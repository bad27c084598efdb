// CompleteStream: a complete Response relayed as a stream gives the same head
// fields, length and bytes (memory body, file range read in chunks, HEAD).
#include "http/complete_stream.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace lepus {
namespace {

std::string drain(ResponseStream& stream) {
    std::string out;
    while (!stream.ended()) {
        EXPECT_EQ(stream.poll(), StreamState::Ready);
        std::span<const char> data = stream.body();
        if (data.empty()) break;
        size_t take = std::min<size_t>(data.size(), 1000); // the engine takes what fits
        out.append(data.data(), take);
        stream.consume(take);
    }
    return out;
}

std::string header(const StreamHead& head, std::string_view name) {
    for (const Header& h : head.headers)
        if (h.name == name) return std::string(h.value);
    return "(none)";
}

TEST(CompleteStream, MemoryBodyWithItsHeadFields) {
    Response response;
    response.head.status = 404;
    response.head.add("Content-Type", "text/html");
    response.head.add("WWW-Authenticate", "Basic realm=\"a\"");
    response.head.content_length = 5;
    response.owned_body = "oops!"; // short: lives inside the string, moves with it
    response.body = response.owned_body;
    CompleteStream stream(response, false);
    EXPECT_EQ(response.head.field_count(), 0u); // taken over
    EXPECT_EQ(stream.head().status, 404);
    EXPECT_EQ(stream.head().content_length, 5u);
    EXPECT_EQ(header(stream.head(), "Content-Type"), "text/html");
    EXPECT_EQ(header(stream.head(), "WWW-Authenticate"), "Basic realm=\"a\"");
    EXPECT_EQ(header(stream.head(), "Content-Length"), "(none)"); // the engine writes its own
    EXPECT_EQ(drain(stream), "oops!");
    EXPECT_TRUE(stream.ended());
    EXPECT_EQ(stream.offer_body(std::span<const char>("abc", 3)), 3u); // read and dropped
}

TEST(CompleteStream, AFileRangeInChunksAndHeadWithout) {
    char path[] = "/tmp/lepus-complete-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    std::string content;
    for (int i = 0; i < 200000; ++i)
        content.push_back(char('a' + i % 26));
    ASSERT_EQ(write(fd, content.data(), content.size()), ssize_t(content.size()));
    for (bool head_only : {false, true}) {
        Response response;
        response.head.status = 206;
        response.head.content_length = 150000;
        response.file_fd = fd;
        response.file_offset = 1000;
        response.file_length = 150000;
        CompleteStream stream(response, head_only);
        EXPECT_EQ(stream.head().content_length, 150000u);
        std::string body = drain(stream);
        EXPECT_TRUE(stream.ended());
        EXPECT_EQ(body, head_only ? "" : content.substr(1000, 150000));
    }
    close(fd);
    unlink(path);
}

} // namespace
} // namespace lepus
