// CGI response header parsing (src/fastcgi/cgi_response.cc).
#include "fastcgi/cgi_response.h"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace lepus::fastcgi {
namespace {

struct Parsed {
    CgiParseStatus status;
    int code = 0;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    std::optional<uint64_t> content_length;
    bool operator==(const Parsed&) const = default;
};

// Parses `stream` split at `cut`; what follows the header block is the body.
Parsed parse(std::string_view stream, size_t cut, CgiResponseParser& parser) {
    Parsed parsed{CgiParseStatus::Again, 0, {}, {}, {}};
    size_t start = 0;
    for (size_t end : {cut, stream.size()}) {
        std::span<const char> piece(stream.data() + start, end - start);
        start = end;
        if (parsed.status == CgiParseStatus::Done) {
            parsed.body.append(piece.begin(), piece.end());
            continue;
        }
        size_t consumed = 0;
        parsed.status = parser.feed(piece, consumed);
        EXPECT_LE(consumed, piece.size());
        if (parsed.status == CgiParseStatus::Error) return parsed;
        if (parsed.status == CgiParseStatus::Again) {
            EXPECT_EQ(consumed, piece.size());
        }
        if (parsed.status == CgiParseStatus::Done)
            parsed.body.append(piece.begin() + consumed, piece.end());
    }
    if (parsed.status == CgiParseStatus::Done) {
        parsed.code = parser.status();
        for (const Header& h : parser.headers())
            parsed.headers.emplace_back(h.name, h.value);
        parsed.content_length = parser.content_length();
    }
    return parsed;
}

Parsed parse(std::string_view stream) {
    CgiResponseParser parser;
    return parse(stream, stream.size(), parser);
}

TEST(CgiResponse, StatusAndHeaders) {
    Parsed p =
        parse("Status: 201 Created\r\nX-Custom: yes\r\nContent-Type:text/plain \r\n\r\nbody");
    ASSERT_EQ(p.status, CgiParseStatus::Done);
    EXPECT_EQ(p.code, 201);
    using H = std::vector<std::pair<std::string, std::string>>;
    EXPECT_EQ(p.headers, (H{{"X-Custom", "yes"}, {"Content-Type", "text/plain"}}));
    EXPECT_EQ(p.body, "body");
    CgiResponseParser parser;
    size_t consumed = 0;
    ASSERT_EQ(parser.feed(std::string_view("Status: 404 Not Found\n\n"), consumed),
              CgiParseStatus::Done);
    EXPECT_EQ(parser.reason(), "Not Found");
}

TEST(CgiResponse, DefaultsTo200AndLocationTo302) {
    EXPECT_EQ(parse("Content-Type: text/html\n\n").code, 200);
    EXPECT_EQ(parse("Location: http://example.com/\n\n").code, 302);
    EXPECT_EQ(parse("Location: /x\nStatus: 301\n\n").code, 301);
    EXPECT_EQ(parse("\r\nbody").code, 200) << "an empty header block is allowed";
}

TEST(CgiResponse, ContentLengthNoted) {
    Parsed p = parse("Content-Length: 5\n\nhello");
    ASSERT_EQ(p.status, CgiParseStatus::Done);
    EXPECT_EQ(p.content_length, 5u);
    EXPECT_EQ(parse("Content-Type: x\n\n").content_length, std::nullopt);
    EXPECT_EQ(parse("Content-Length: 5\nContent-Length: 5\n\n").status, CgiParseStatus::Done);
}

TEST(CgiResponse, MalformedIsAnError) {
    for (std::string_view bad :
         {"no colon here\n\n", ": empty name\n\n", "Bad Name: x\n\n", "X: a\n folded\n\n",
          "Status: abc\n\n", "Status: 20\n\n", "Status: 2000\n\n", "Status: 099\n\n",
          "Status: 200\nStatus: 201\n\n", "Content-Length: -1\n\n", "Content-Length: 1, 1\n\n",
          "Content-Length: 1\nContent-Length: 2\n\n", "X: bell\a\n\n", "HTTP/1.1 200 OK\r\n\r\n"}) {
        CgiResponseParser parser;
        size_t consumed = 0;
        EXPECT_EQ(parser.feed(bad, consumed), CgiParseStatus::Error) << bad;
        EXPECT_FALSE(parser.error().empty());
        EXPECT_EQ(parser.feed(std::string_view("\n"), consumed), CgiParseStatus::Error)
            << "stays failed";
    }
}

// Issue 14: PHP's http_response_code(100) or (101) sends "Status: 1xx". Passed on, it
// made lepus answer 101 with the body dropped and the next response answer this
// request (a desync). A 1xx is interim (RFC 9110 §15.2): never a CGI response.
TEST(CgiResponse, InterimOrOutOfRangeStatusIsAnError) {
    for (std::string_view bad :
         {"Status: 100\n\n", "Status: 100 Continue\r\nContent-Type: text/html\r\n\r\nbody",
          "Status: 101 Switching Protocols\r\n\r\nbody", "Status: 102\n\n", "Status: 103\n\n",
          "Status: 199 x\n\n", "Status: 000\n\n", "Status: 099\n\n", "Status: 600\n\n",
          "Status: 999\n\n", "Status: 1O1\n\n", "Status: +101\n\n", "Status: 101x\n\n",
          "Status:\n\n"}) {
        for (size_t cut = 0; cut <= bad.size(); ++cut) {
            CgiResponseParser parser;
            EXPECT_EQ(parse(bad, cut, parser).status, CgiParseStatus::Error)
                << bad << " cut at " << cut;
        }
    }
    CgiResponseParser parser;
    size_t consumed = 0;
    ASSERT_EQ(parser.feed(std::string_view("X: 1\nStatus: 101 Switching Protocols\n\n"), consumed),
              CgiParseStatus::Error);
    EXPECT_EQ(parser.error(), "interim (1xx) Status in a final response");
    EXPECT_EQ(parser.error_value(), "101 Switching Protocols"); // for the error-log line
    parser.reset();
    EXPECT_EQ(parser.error_value(), "");
    ASSERT_EQ(parser.feed(std::string_view("Status: 600\n\n"), consumed), CgiParseStatus::Error);
    EXPECT_EQ(parser.error(), "Status outside 200..599");
    EXPECT_EQ(parser.error_value(), "600");
}

TEST(CgiResponse, FinalStatusBoundsAreAccepted) {
    EXPECT_EQ(parse("Status: 200\n\n").code, 200);
    EXPECT_EQ(parse("Status: 599 Odd\n\n").code, 599);
}

TEST(CgiResponse, ErrorValueOfAMalformedLineIsTheLine) {
    CgiResponseParser parser;
    size_t consumed = 0;
    ASSERT_EQ(parser.feed(std::string_view("A: 1\nno colon\n\n"), consumed), CgiParseStatus::Error);
    EXPECT_EQ(parser.error_value(), "no colon");
}

TEST(CgiResponse, OversizedBlockIsAnError) {
    std::string block;
    while (block.size() <= CgiResponseParser::kMaxHeaderBlock)
        block += "X-Filler: " + std::string(100, 'f') + "\r\n";
    EXPECT_EQ(parse(block).status, CgiParseStatus::Error);
    // Just under the bound is fine.
    std::string fits = "X: " + std::string(CgiResponseParser::kMaxHeaderBlock - 5, 'f') + "\n\n";
    ASSERT_EQ(fits.size(), CgiResponseParser::kMaxHeaderBlock);
    EXPECT_EQ(parse(fits + "body").status, CgiParseStatus::Done);
    EXPECT_EQ(parse(fits + "\nbody").body, "\nbody");
}

TEST(CgiResponse, SplitAtEveryOffset) {
    std::string stream =
        "Status: 201 Created\r\nX-Custom: yes\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
        "Content-Length: 10\r\n\r\n0123456789";
    Parsed whole = parse(stream);
    ASSERT_EQ(whole.status, CgiParseStatus::Done);
    ASSERT_EQ(whole.headers.size(), 4u);
    EXPECT_EQ(whole.body, "0123456789");
    CgiResponseParser parser; // one parser, reset between responses (keep-alive reuse)
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
        parser.reset();
        ASSERT_EQ(parse(stream, cut, parser), whole) << "cut at " << cut;
    }
}

TEST(CgiResponse, ByteAtATimeKeepsViewsValid) {
    std::string stream = "A: 1\r\nB: 2\r\n\r\n";
    CgiResponseParser parser;
    size_t consumed = 0;
    for (size_t i = 0; i + 1 < stream.size(); ++i)
        ASSERT_EQ(parser.feed(std::span<const char>(&stream[i], 1), consumed),
                  CgiParseStatus::Again);
    ASSERT_EQ(parser.feed(std::span<const char>(&stream.back(), 1), consumed),
              CgiParseStatus::Done);
    stream.assign(stream.size(), '#'); // the views point into the parser, not the input
    ASSERT_EQ(parser.headers().size(), 2u);
    EXPECT_EQ(parser.headers()[1].name, "B");
    EXPECT_EQ(parser.headers()[1].value, "2");
}

} // namespace
} // namespace lepus::fastcgi
