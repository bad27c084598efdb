// ResponseHead: fields added, set, removed and read by name (case-insensitive),
// a cached block of fields ahead of the head's own, and the HTTP/1.1 text
// written from it once.
#include "http/response_head.h"

#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

namespace lepus {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields fields_of(const ResponseHead& head) {
    Fields fields;
    head.for_each([&](std::string_view name, std::string_view value) {
        fields.emplace_back(std::string(name), std::string(value));
    });
    return fields;
}

std::string http1_fields(const ResponseHead& head) {
    std::string out;
    head.append_http1_fields(out);
    return out;
}

TEST(ResponseHead, AddKeepsOrderAndDuplicates) {
    ResponseHead head;
    head.add("Content-Type", "text/html");
    head.add("Set-Cookie", "a=1");
    head.add("Set-Cookie", "b=2");
    EXPECT_EQ(
        fields_of(head),
        (Fields{{"Content-Type", "text/html"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}}));
    EXPECT_EQ(http1_fields(head),
              "Content-Type: text/html\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
    EXPECT_EQ(head.get("set-cookie"), "a=1");
    EXPECT_EQ(head.get("X-Absent"), std::nullopt);
}

TEST(ResponseHead, SetReplacesTheFirstInPlaceAndDropsTheRest) {
    ResponseHead head;
    head.add("A", "1");
    head.add("X-Tag", "old");
    head.add("B", "2");
    head.add("x-tag", "older");
    head.set("X-TAG", "new");
    EXPECT_EQ(fields_of(head), (Fields{{"A", "1"}, {"X-Tag", "new"}, {"B", "2"}}));
    EXPECT_EQ(http1_fields(head), "A: 1\r\nX-Tag: new\r\nB: 2\r\n");
    head.set("C", "3"); // absent: appended
    head.add("D", "4"); // after an edit, lines are written field by field
    EXPECT_EQ(http1_fields(head), "A: 1\r\nX-Tag: new\r\nB: 2\r\nC: 3\r\nD: 4\r\n");
}

TEST(ResponseHead, RemoveDropsEveryFieldOfTheName) {
    ResponseHead head;
    head.add("Vary", "Accept-Encoding");
    head.add("ETag", "\"e\"");
    head.add("vary", "Origin");
    EXPECT_EQ(head.remove("VARY"), 2u);
    EXPECT_EQ(head.remove("Vary"), 0u);
    EXPECT_EQ(fields_of(head), (Fields{{"ETag", "\"e\""}}));
    EXPECT_EQ(http1_fields(head), "ETag: \"e\"\r\n");
}

TEST(ResponseHead, BlockComesFirstAndIsCopiedOnlyWhenEdited) {
    std::string lines;
    std::vector<FieldAt> block;
    append_field_line("Content-Type", "text/css", lines, block);
    append_field_line("ETag", "\"1\"", lines, block);
    EXPECT_EQ(lines, "Content-Type: text/css\r\nETag: \"1\"\r\n");

    ResponseHead head;
    head.set_block(lines, block);
    head.add("X-Rule", "on");
    EXPECT_EQ(head.field_count(), 3u);
    EXPECT_EQ(head.get("etag"), "\"1\"");
    EXPECT_EQ(http1_fields(head), lines + "X-Rule: on\r\n");
    head.set("X-Rule", "off"); // not a block field: the block stays shared
    EXPECT_EQ(http1_fields(head), lines + "X-Rule: off\r\n");

    head.set("Content-Type", "text/plain"); // a block field: copied first
    head.remove("ETag");
    EXPECT_EQ(fields_of(head), (Fields{{"Content-Type", "text/plain"}, {"X-Rule", "off"}}));
    EXPECT_EQ(http1_fields(head), "Content-Type: text/plain\r\nX-Rule: off\r\n");
    EXPECT_EQ(lines, "Content-Type: text/css\r\nETag: \"1\"\r\n"); // the owner's, untouched
}

TEST(ResponseHead, ClearKeepsCapacity) {
    ResponseHead head;
    head.status = 404;
    head.content_length = 7;
    for (int i = 0; i < 20; ++i)
        head.add("X-Field", "some value");
    std::string lines = "A: 1\r\n";
    std::vector<FieldAt> block{{0, 1, 3, 1}};
    head.set_block(lines, block);
    head.clear();
    EXPECT_EQ(head.status, 0);
    EXPECT_EQ(head.content_length, std::nullopt);
    EXPECT_EQ(head.field_count(), 0u);
    EXPECT_EQ(http1_fields(head), "");
}

TEST(ResponseHead, Http1HeadIsWrittenOnceWithTheConnectionsState) {
    ResponseHead head;
    head.status = 404;
    head.content_length = 12;
    head.add("Content-Type", "text/html");
    std::string out = "stale";
    write_http1_head(head, 0, true, 1, out);
    EXPECT_TRUE(out.starts_with("HTTP/1.1 404 Not Found\r\nDate: ")) << out;
    EXPECT_TRUE(out.ends_with("\r\nServer: lepus\r\nContent-Type: text/html\r\n"
                              "Content-Length: 12\r\n\r\n"))
        << out;
    write_http1_head(head, 0, false, 1, out);
    EXPECT_TRUE(out.ends_with("Content-Length: 12\r\nConnection: close\r\n\r\n")) << out;
    head.status = 200;
    write_http1_head(head, 0, true, 0, out); // RFC 9112 §9.3: a 1.0 client is told
    EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
    EXPECT_TRUE(out.ends_with("Connection: keep-alive\r\n\r\n")) << out;
}

} // namespace
} // namespace lepus
