#include "http/chunked_decoder.h"

#include <gtest/gtest.h>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {
namespace {

using namespace std::literals;

struct Result {
    ChunkedDecoder::Status status = ChunkedDecoder::Status::Again;
    std::string body;
    size_t consumed = 0; // of the whole input, on Done
    bool too_large = false;
    bool operator==(const Result&) const = default;
};

// Feeds `input` in pieces cut at `cuts` (increasing offsets), each piece in its own buffer.
Result decode(std::string_view input, std::vector<size_t> cuts = {},
              uint64_t max_body = UINT64_MAX) {
    ChunkedDecoder decoder(max_body);
    Result r;
    cuts.push_back(input.size());
    size_t start = 0;
    for (size_t cut : cuts) {
        std::vector<char> piece(input.begin() + start, input.begin() + cut);
        size_t consumed = 0;
        r.status = decoder.feed(piece, consumed, r.body);
        if (r.status == ChunkedDecoder::Status::Done) {
            r.consumed = start + consumed;
            break;
        }
        if (r.status == ChunkedDecoder::Status::Error) {
            r.too_large = decoder.body_too_large();
            break;
        }
        EXPECT_EQ(consumed, piece.size()); // Again consumes everything
        start = cut;
    }
    if (r.status == ChunkedDecoder::Status::Done) {
        EXPECT_EQ(decoder.body_size(), r.body.size());
    }
    return r;
}

std::string test_name(std::string_view text, size_t index) {
    std::string name = std::to_string(index) + "_";
    for (char c : text)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return name;
}

struct ValidCase {
    const char* name;
    std::string_view input; // may carry bytes of the next request after the body
    std::string_view body;
    size_t consumed; // 0: the whole input
};

const ValidCase kValidCases[] = {
    {"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello", 0},
    {"two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", 0},
    {"empty body", "0\r\n\r\n", "", 0},
    {"hex sizes both cases", "a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n",
     "0123456789abcdefghijk", 0},
    {"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello", 0},
    {"extension", "5;name=value\r\nhello\r\n0;last\r\n\r\n", "hello", 0},
    {"extension with BWS", "5 ;a=b ; c\r\nhello\r\n0\r\n\r\n", "hello", 0},
    {"quoted extension", "5;a=\"x;y z\"\r\nhello\r\n0\r\n\r\n", "hello", 0},
    {"trailers", "5\r\nhello\r\n0\r\nX-Sum: abc\r\nY:\r\n\r\n", "hello", 0},
    {"CRLF inside data", "4\r\n\r\n\r\n\r\n0\r\n\r\n", "\r\n\r\n", 0},
    {"next request follows", "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "abc", 13},
    {"binary data", "3\r\n\0\xff\n\r\n0\r\n\r\n"sv, "\0\xff\n"sv, 0},
};

class ValidChunked : public testing::TestWithParam<ValidCase> {};

TEST_P(ValidChunked, DecodesWhole) {
    const ValidCase& c = GetParam();
    Result r = decode(c.input);
    ASSERT_EQ(r.status, ChunkedDecoder::Status::Done);
    EXPECT_EQ(r.body, c.body);
    EXPECT_EQ(r.consumed, c.consumed ? c.consumed : c.input.size());
}

// Two pieces cut at every offset, and one byte at a time: the same body and end.
TEST_P(ValidChunked, DecodesSplitAtEveryOffset) {
    const ValidCase& c = GetParam();
    Result whole = decode(c.input);
    for (size_t cut = 0; cut <= c.input.size(); ++cut)
        ASSERT_EQ(decode(c.input, {cut}), whole) << "cut at " << cut;
    std::vector<size_t> every;
    for (size_t i = 1; i < c.input.size(); ++i)
        every.push_back(i);
    EXPECT_EQ(decode(c.input, every), whole);
}

INSTANTIATE_TEST_SUITE_P(Table, ValidChunked, testing::ValuesIn(kValidCases),
                         [](const auto& info) { return test_name(info.param.name, info.index); });

struct ErrorCase {
    const char* name;
    std::string_view input;
};

const ErrorCase kErrorCases[] = {
    {"no size", "\r\nhello\r\n0\r\n\r\n"},
    {"non hex size", "g\r\nhello\r\n0\r\n\r\n"},
    {"negative size", "-5\r\nhello\r\n0\r\n\r\n"},
    {"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"},
    {"bare LF after size", "5\nhello\r\n0\r\n\r\n"},
    {"bare CR after size", "5\rhello\r\n0\r\n\r\n"},
    {"space without extension", "5 \r\nhello\r\n0\r\n\r\n"},
    {"space inside size", "1 0\r\n0123456789abcdef\r\n0\r\n\r\n"},
    {"size overflow", "10000000000000000\r\n"},
    {"sixteen digit size", "1000000000000000\r\n"},
    {"control byte in extension", "5;a\x01\r\nhello\r\n0\r\n\r\n"},
    {"LF in extension", "5;a\nhello\r\n0\r\n\r\n"},
    {"data longer than size", "5\r\nhelloX\r\n0\r\n\r\n"},
    {"data shorter than size", "5\r\nhell\r\n0\r\n\r\n"},
    {"bare LF after data", "5\r\nhello\n0\r\n\r\n"},
    {"bad trailer name", "0\r\nBad Name: x\r\n\r\n"},
    {"trailer without colon", "0\r\nX\r\n\r\n"},
    {"folded trailer", "0\r\nX: a\r\n b\r\n\r\n"},
    {"control byte in trailer", "0\r\nX: a\x01\r\n\r\n"},
    {"bare LF ending trailers", "0\r\n\n"},
    {"bare CR ending trailers", "0\r\n\rX"},
};

class InvalidChunked : public testing::TestWithParam<ErrorCase> {};

TEST_P(InvalidChunked, FailsWholeAndSplit) {
    const ErrorCase& c = GetParam();
    Result whole = decode(c.input);
    ASSERT_EQ(whole.status, ChunkedDecoder::Status::Error);
    EXPECT_FALSE(whole.too_large);
    for (size_t cut = 0; cut <= c.input.size(); ++cut)
        ASSERT_EQ(decode(c.input, {cut}).status, ChunkedDecoder::Status::Error) << cut;
}

INSTANTIATE_TEST_SUITE_P(Table, InvalidChunked, testing::ValuesIn(kErrorCases),
                         [](const auto& info) { return test_name(info.param.name, info.index); });

TEST(ChunkedDecoder, LargestAcceptedSize) {
    // 15 hex digits decode; the data simply has not arrived yet.
    EXPECT_EQ(decode("fffffffffffffff\r\nabc").status, ChunkedDecoder::Status::Again);
    EXPECT_EQ(decode("000000000000000000001\r\na\r\n0\r\n\r\n").body, "a"); // zeros are free
}

TEST(ChunkedDecoder, MaxBodySizeFlagsTooLarge) {
    std::string_view input = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    Result exact = decode(input, {}, 11);
    EXPECT_EQ(exact.status, ChunkedDecoder::Status::Done);
    EXPECT_EQ(exact.body, "hello world");
    Result over = decode(input, {}, 10);
    EXPECT_EQ(over.status, ChunkedDecoder::Status::Error);
    EXPECT_TRUE(over.too_large);
    EXPECT_EQ(over.body, "hello"); // refused at the size line, before the data arrives
}

TEST(ChunkedDecoder, EndlessExtensionsAndTrailersFail) {
    std::string ext = "5;" + std::string(5000, 'a');
    EXPECT_EQ(decode(ext).status, ChunkedDecoder::Status::Error);
    std::string trailers = "0\r\n";
    for (int i = 0; i < 3000; ++i)
        trailers += "X-Trailer: value\r\n";
    EXPECT_EQ(decode(trailers).status, ChunkedDecoder::Status::Error);
    std::string zeros(5000, '0');
    EXPECT_EQ(decode(zeros).status, ChunkedDecoder::Status::Error);
}

TEST(ChunkedDecoder, ResetDecodesAnotherBody) {
    ChunkedDecoder decoder;
    std::string out;
    size_t consumed = 0;
    ASSERT_EQ(decoder.feed("3\r\nabc\r\n0\r\n\r\n"sv, consumed, out), ChunkedDecoder::Status::Done);
    EXPECT_EQ(decoder.feed("1\r\n"sv, consumed, out), ChunkedDecoder::Status::Done);
    EXPECT_EQ(consumed, 0u);
    decoder.reset();
    EXPECT_EQ(decoder.body_size(), 0u);
    ASSERT_EQ(decoder.feed("2\r\nde\r\n0\r\n\r\n"sv, consumed, out), ChunkedDecoder::Status::Done);
    EXPECT_EQ(out, "abcde");
    EXPECT_EQ(decoder.body_size(), 2u);
    ASSERT_EQ(decoder.feed("x"sv, consumed, out), ChunkedDecoder::Status::Done);
    decoder.reset();
    ASSERT_EQ(decoder.feed("x"sv, consumed, out), ChunkedDecoder::Status::Error);
    EXPECT_STRNE(decoder.error_reason(), "");
    decoder.reset();
    EXPECT_EQ(decoder.feed("0\r\n\r\n"sv, consumed, out), ChunkedDecoder::Status::Done);
}

TEST(ChunkedDecoder, LargeBodyInManyChunks) {
    std::string input, expected;
    for (int i = 1; i <= 200; ++i) {
        std::string data(static_cast<size_t>(i * 37), static_cast<char>('a' + i % 26));
        char size[32];
        snprintf(size, sizeof size, "%x\r\n", static_cast<unsigned>(data.size()));
        input += size + data + "\r\n";
        expected += data;
    }
    input += "0\r\n\r\n";
    std::vector<size_t> cuts;
    for (size_t i = 1000; i < input.size(); i += 1000)
        cuts.push_back(i);
    Result r = decode(input, cuts);
    ASSERT_EQ(r.status, ChunkedDecoder::Status::Done);
    EXPECT_EQ(r.body, expected);
    EXPECT_EQ(r.consumed, input.size());
}

} // namespace
} // namespace lepus
