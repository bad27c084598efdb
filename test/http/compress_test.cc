// negotiate_coding (RFC 9110 §12.5.3), is_compressible_type, and the coders:
// gzip round-trips through zlib here; br and zstd are decoded by the real
// command-line tools in test/e2e/compress_test.py.
#include "http/compress.h"

#include <gtest/gtest.h>
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

} // namespace
} // namespace lepus
