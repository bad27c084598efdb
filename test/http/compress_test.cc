// negotiate_coding (RFC 9110 §12.5.3), is_compressible_type, and the coders:
// gzip round-trips through zlib here; br and zstd are decoded by the real
// command-line tools in test/e2e/compress_test.py.
#include "http/compress.h"
#include "http/compress_stream.h"

#include <gtest/gtest.h>
#include <vector>
#include <zlib.h>

namespace lepus {
namespace {

constexpr CodingSet kAll{true, true, true};

Coding pick(std::string_view accept, CodingSet offered = kAll) {
    Negotiated result = negotiate_coding(accept, offered);
    EXPECT_TRUE(result.acceptable) << accept;
    return result.coding;
}

TEST(Negotiate, PreferenceOnTiesAndQValues) {
    EXPECT_EQ(pick("gzip, deflate, br, zstd"), Coding::Brotli);
    EXPECT_EQ(pick("gzip, zstd"), Coding::Zstd);
    EXPECT_EQ(pick("gzip;q=1.0, br;q=0.5"), Coding::Gzip);
    EXPECT_EQ(pick("br;q=0, gzip;q=0.1"), Coding::Gzip);
    EXPECT_EQ(pick("GZIP"), Coding::Gzip);
    EXPECT_EQ(pick("x-gzip"), Coding::Gzip);
    EXPECT_EQ(pick("gzip, br", {true, false, false}), Coding::Gzip); // only gzip offered
}

TEST(Negotiate, IdentityAndStar) {
    EXPECT_EQ(pick(""), Coding::Identity);
    EXPECT_EQ(pick("deflate"), Coding::Identity);
    EXPECT_EQ(pick("gzip;q=0"), Coding::Identity);
    EXPECT_EQ(pick("*"), Coding::Brotli);
    EXPECT_EQ(pick("*;q=0.5, identity;q=1"), Coding::Identity);
    EXPECT_EQ(pick("gzip;q=0.0001"), Coding::Identity); // malformed q: not acceptable
    EXPECT_FALSE(negotiate_coding("identity;q=0", kAll).acceptable);
    EXPECT_FALSE(negotiate_coding("*;q=0", kAll).acceptable);
    EXPECT_FALSE(negotiate_coding("gzip;q=0, identity;q=0", kAll).acceptable);
    EXPECT_EQ(pick("identity;q=0, gzip"), Coding::Gzip);
    EXPECT_FALSE(negotiate_coding("identity;q=0, br", CodingSet{true, false, false}).acceptable);
}

TEST(Compressible, TypesWorthIt) {
    EXPECT_TRUE(is_compressible_type("text/html; charset=utf-8"));
    EXPECT_TRUE(is_compressible_type("application/javascript"));
    EXPECT_TRUE(is_compressible_type("image/svg+xml"));
    EXPECT_TRUE(is_compressible_type("APPLICATION/JSON"));
    EXPECT_FALSE(is_compressible_type("image/png"));
    EXPECT_FALSE(is_compressible_type("application/octet-stream"));
    EXPECT_FALSE(is_compressible_type("application/gzip"));
    EXPECT_FALSE(is_compressible_type("text/"));
}

std::string gunzip(const std::string& data) {
    z_stream stream{};
    EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
    std::string out(1 << 20, '\0');
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    stream.avail_in = uInt(data.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = uInt(out.size());
    int result = inflate(&stream, Z_SYNC_FLUSH);
    out.resize(out.size() - stream.avail_out);
    inflateEnd(&stream);
    EXPECT_TRUE(result == Z_OK || result == Z_STREAM_END) << result;
    return out;
}

TEST(Coders, OnceAndStreamedGzipDecodeToTheOriginal) {
    std::string text;
    for (int i = 0; i < 2000; ++i)
        text += "<p>line " + std::to_string(i) + " of a page that compresses well</p>\n";
    std::string once = compress_once(Coding::Gzip, text);
    ASSERT_FALSE(once.empty());
    EXPECT_LT(once.size(), text.size() / 4);
    EXPECT_EQ(gunzip(once), text);

    // Streamed: after a flush, what was written so far decodes already.
    auto compressor = Compressor::make(Coding::Gzip);
    std::string out;
    ASSERT_TRUE(compressor->write(std::string_view(text).substr(0, 1000), true, out));
    EXPECT_EQ(gunzip(out), text.substr(0, 1000));
    ASSERT_TRUE(compressor->write(std::string_view(text).substr(1000), false, out));
    ASSERT_TRUE(compressor->finish(out));
    EXPECT_EQ(gunzip(out), text);
}

TEST(Coders, BrotliAndZstdShrinkText) {
    std::string text(100000, 'a');
    for (Coding coding : {Coding::Brotli, Coding::Zstd}) {
        std::string once = compress_once(coding, text);
        EXPECT_FALSE(once.empty());
        EXPECT_LT(once.size(), 1000u);
        auto compressor = Compressor::make(coding);
        std::string out;
        ASSERT_TRUE(compressor->write(text, true, out));
        size_t flushed = out.size();
        EXPECT_GT(flushed, 0u); // a flush gives bytes out at once
        ASSERT_TRUE(compressor->finish(out));
        EXPECT_GE(out.size(), flushed);
    }
}

TEST(StrongForm, WeakTagsLoseTheirWeakness) {
    std::string storage;
    auto strong = [&](std::string_view value) {
        return std::string(strong_form_of_etags(value, storage));
    };
    EXPECT_EQ(strong("W/\"x\""), "\"x\"");
    EXPECT_EQ(strong("\"a\", W/\"b\",W/\"c\""), "\"a\", \"b\",\"c\"");
    EXPECT_EQ(strong("W/\"a,W/b\", W/\"c\""), "\"a,W/b\", \"c\"") << "a comma in an opaque tag";
    EXPECT_EQ(strong("\"W/x\""), "\"W/x\"") << "W/ inside the quotes is the tag's own";
    EXPECT_EQ(strong("w/\"x\""), "w/\"x\"") << "W/ is case-sensitive (RFC 9110 §8.8.3)";
    EXPECT_EQ(strong("*"), "*");
    EXPECT_EQ(strong("W/"), "W/");
    EXPECT_EQ(strong("W/\"unterminated"), "\"unterminated");
    std::string_view plain = "\"x\", \"y\"";
    EXPECT_EQ(strong_form_of_etags(plain, storage).data(), plain.data()) << "no copy";
}

// A backend's stream, fed by the test.
class FakeStream final : public ResponseStream {
public:
    size_t offer_body(std::span<const char> data) override { return data.size(); }
    void end_body() override {}
    StreamState poll() override { return StreamState::Ready; }
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override {
        return {body_.data() + taken_, body_.size() - taken_};
    }
    void consume(size_t bytes) override { taken_ += bytes; }
    bool ended() const override { return ended_; }
    int error_status() const override { return 0; }
    std::span<const Header> error_fields() const override { return {}; }
    void release() override {}

    StreamHead head_;
    std::vector<Header> headers_;
    std::string body_;
    size_t taken_ = 0;
    bool ended_ = false;
};

std::string header_of(const StreamHead& head, std::string_view name) {
    for (const Header& header : head.headers)
        if (header.name == name) return std::string(header.value);
    return "<absent>";
}

std::unique_ptr<FakeStream> page(int status, std::string_view type) {
    auto stream = std::make_unique<FakeStream>();
    stream->head_.status = status;
    stream->headers_ = {{"Content-Type", type}, {"ETag", "\"e\""}};
    stream->head_.headers = stream->headers_;
    return stream;
}

// Issue 31: an empty redirect went out as a 20-byte gzip stream.
TEST(CompressingStream, AnEmptyBodyWithoutLengthIsNotCompressed) {
    auto inner = page(301, "text/html");
    FakeStream& fake = *inner;
    CompressingStream stream(std::move(inner), Coding::Gzip);
    EXPECT_EQ(stream.poll(), StreamState::Pending) << "the length is not known yet";
    fake.ended_ = true;
    ASSERT_EQ(stream.poll(), StreamState::Ready);
    EXPECT_EQ(header_of(stream.head(), "Content-Encoding"), "<absent>");
    EXPECT_EQ(header_of(stream.head(), "ETag"), "\"e\"");
    EXPECT_EQ(header_of(stream.head(), "Vary"), "Accept-Encoding");
    EXPECT_TRUE(stream.body().empty());
    EXPECT_TRUE(stream.ended());
}

TEST(CompressingStream, AShortBodyGoesAsItIs) {
    auto inner = page(200, "text/html");
    FakeStream& fake = *inner;
    CompressingStream stream(std::move(inner), Coding::Gzip);
    fake.body_ = "short";
    EXPECT_EQ(stream.poll(), StreamState::Pending);
    fake.ended_ = true;
    ASSERT_EQ(stream.poll(), StreamState::Ready);
    EXPECT_EQ(header_of(stream.head(), "Content-Encoding"), "<absent>");
    EXPECT_EQ(std::string(stream.body().data(), stream.body().size()), "short");
}

TEST(CompressingStream, EnoughBytesDecideBeforeTheEnd) {
    auto inner = page(200, "text/html");
    FakeStream& fake = *inner;
    CompressingStream stream(std::move(inner), Coding::Gzip);
    fake.body_.assign(kMinCompressLength, 'a');
    ASSERT_EQ(stream.poll(), StreamState::Ready) << "no need to wait for the end";
    EXPECT_EQ(header_of(stream.head(), "Content-Encoding"), "gzip");
    EXPECT_EQ(header_of(stream.head(), "ETag"), "W/\"e\"");
    EXPECT_FALSE(stream.body().empty());
}

TEST(CompressingStream, NothingWaitsWhenCompressionCannotApply) {
    auto image = page(200, "image/png");
    CompressingStream not_compressible(std::move(image), Coding::Gzip);
    EXPECT_EQ(not_compressible.poll(), StreamState::Ready);
    auto html = page(200, "text/html");
    CompressingStream identity(std::move(html), Coding::Identity);
    EXPECT_EQ(identity.poll(), StreamState::Ready);
    auto no_content = page(204, "text/html");
    CompressingStream empty(std::move(no_content), Coding::Gzip);
    EXPECT_EQ(empty.poll(), StreamState::Ready);
    auto known = page(200, "text/html");
    known->head_.content_length = 10;
    CompressingStream short_known(std::move(known), Coding::Gzip);
    ASSERT_EQ(short_known.poll(), StreamState::Ready);
    EXPECT_EQ(header_of(short_known.head(), "Content-Encoding"), "<absent>");
}

} // namespace
} // namespace lepus
