// The HTTP/2 engine's response heads: a ResponseHead as an HTTP/2 header
// block (":status", date and server first, names lowercased, connection
// fields dropped), the scratch buffer reused from one head to the next, and
// which answers carry no body (RFC 9110 §6.4.1).
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

Fields as_pairs(const std::vector<HeadField>& fields) {
    Fields pairs;
    for (const HeadField& field : fields)
        pairs.emplace_back(std::string(reinterpret_cast<const char*>(field.name), field.namelen),
                           std::string(reinterpret_cast<const char*>(field.value), field.valuelen));
    return pairs;
}

constexpr time_t kNow = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT

TEST(Http2Head, StatusDateServerFirstNamesLowercasedConnectionFieldsDropped) {
    ResponseHead head;
    head.status = 200;
    head.content_length = 12;
    head.add("Content-Type", "text/html");
    for (const char* name :
         {"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "PROXY-CONNECTION", "Upgrade"})
        head.add(name, "x");
    head.add("X-Custom", "a b");
    head.add("TEE", "1");
    HeadText text;
    std::vector<HeadField> fields;
    head_to_fields(head, kNow, text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "200"},
                                        {"date", "Sun, 06 Nov 1994 08:49:37 GMT"},
                                        {"server", "lepus"},
                                        {"content-type", "text/html"},
                                        {"x-custom", "a b"},
                                        {"tee", "1"},
                                        {"content-length", "12"}}));
}

TEST(Http2Head, ScratchSpaceIsReusedWithoutStaleFields) {
    ResponseHead head;
    head.status = 200;
    head.add("A", "1");
    head.add("B", "2");
    head.add("Content-Security-Policy-Report-Only", "default-src 'self'");
    HeadText text;
    std::vector<HeadField> fields;
    head_to_fields(head, kNow, text, fields);
    head.clear();
    head.status = 404;
    head.add("Vary", "Accept");
    head_to_fields(head, kNow, text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "404"},
                                        {"date", "Sun, 06 Nov 1994 08:49:37 GMT"},
                                        {"server", "lepus"},
                                        {"vary", "Accept"}}));
}

// Past the room kept in place, the names go to the heap; a usual head after
// that is written in place again, each correct.
TEST(Http2Head, ALongHeadAndThenAShortOne) {
    ResponseHead head;
    head.status = 200;
    std::string name(40, 'N');
    Fields expected{
        {":status", "200"}, {"date", "Sun, 06 Nov 1994 08:49:37 GMT"}, {"server", "lepus"}};
    for (char last : {'a', 'b', 'c', 'd', 'e', 'f'}) {
        name.back() = char(last - 32);
        head.add(name, std::string(1, last));
        expected.emplace_back(std::string(39, 'n') + last, std::string(1, last));
    }
    HeadText text;
    std::vector<HeadField> fields;
    head_to_fields(head, kNow, text, fields);
    EXPECT_EQ(as_pairs(fields), expected);
    EXPECT_GT(text.capacity(), 0u);
    head.clear();
    head.status = 304;
    head.add("ETag", "\"2\"");
    head_to_fields(head, kNow, text, fields);
    EXPECT_EQ(as_pairs(fields), (Fields{{":status", "304"},
                                        {"date", "Sun, 06 Nov 1994 08:49:37 GMT"},
                                        {"server", "lepus"},
                                        {"etag", "\"2\""}}));
}

TEST(Http2Head, ABlockOfCachedFieldsComesFirst) {
    std::string lines;
    std::vector<FieldAt> block;
    append_field_line("Content-Type", "text/css", lines, block);
    append_field_line("ETag", "\"1\"", lines, block);
    ResponseHead head;
    head.status = 206;
    head.set_block(lines, block);
    head.add("Content-Range", "bytes 0-0/9");
    HeadText text;
    std::vector<HeadField> fields;
    head_to_fields(head, kNow, text, fields);
    Fields pairs = as_pairs(fields);
    ASSERT_EQ(pairs.size(), 6u);
    EXPECT_EQ(pairs[0], (std::pair<std::string, std::string>{":status", "206"}));
    EXPECT_EQ(pairs[3], (std::pair<std::string, std::string>{"content-type", "text/css"}));
    EXPECT_EQ(pairs[4], (std::pair<std::string, std::string>{"etag", "\"1\""}));
    EXPECT_EQ(pairs[5], (std::pair<std::string, std::string>{"content-range", "bytes 0-0/9"}));
    EXPECT_EQ(lines, "Content-Type: text/css\r\nETag: \"1\"\r\n"); // the block is not lowercased
}

// The fields point into the head and the text, never copied; the date is the
// block's own copy (the per-second cache may change before it is read).
TEST(Http2Head, FieldsPointIntoTheHeadAndTheDateIsTheBlocksOwn) {
    ResponseHead head;
    head.status = 200;
    head.add("ETag", "\"1\"");
    HeadText text;
    std::vector<HeadField> fields;
    head_to_fields(head, kNow, text, fields);
    ASSERT_EQ(fields.size(), 4u);
    EXPECT_EQ(fields[3].value_view().data(), head.get("ETag")->data());
    const char* date = reinterpret_cast<const char*>(fields[1].value);
    EXPECT_GE(date, text.data());
    EXPECT_LE(date + fields[1].valuelen, text.data() + text.size());
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
