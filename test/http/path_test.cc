#include "http/path.h"

#include <gtest/gtest.h>
#include <random>
#include <string>

namespace lepus {
namespace {

struct PathCase {
    std::string raw;
    int status;
    std::string expected;
};

TEST(DecodePath, Table) {
    const PathCase cases[] = {
        {"/", 0, "/"},
        {"/a/b", 0, "/a/b"},
        {"//a///b", 0, "/a/b"},
        {"/a/b/", 0, "/a/b/"},
        {"/a/./b/", 0, "/a/b/"},
        {"/a/b/.", 0, "/a/b/"},
        {"/a/b/..", 0, "/a/"},
        {"/a/..", 0, "/"},
        {"/a/../b", 0, "/b"},
        {"/a/...", 0, "/a/..."},
        {"/a/..b/c", 0, "/a/..b/c"},
        {"/.hidden", 0, "/.hidden"},
        {"/a/../../b", 400, ""},
        {"/..", 400, ""},
        {"/../a", 400, ""},
        {"/%2e%2e/x", 400, ""},
        {"/%2E%2E", 400, ""},
        {"/a/%2e%2e/b", 0, "/b"},
        {"/a/%2e/b", 0, "/a/b"},
        {"/a%2fb", 0, "/a/b"},
        {"/a%2F%2Fb", 0, "/a/b"},
        {"/a%2f..%2f..%2fetc/passwd", 400, ""},
        {"/%252e%252e/x", 0, "/%2e%2e/x"}, // decoded once only
        {"/caf%C3%A9", 0, "/caf\xC3\xA9"},
        {"/a%20b", 0, "/a b"},
        {"/a%00b", 400, ""},
        {"/%00", 400, ""},
        {std::string("/a\0b", 4), 400, ""},
        {"/a%0", 400, ""},
        {"/a%", 400, ""},
        {"/a%zz", 400, ""},
        {"/a%g0", 400, ""},
        {"a/b", 400, ""},
        {"*", 400, ""},
        {"", 400, ""},
    };
    for (const PathCase& c : cases) {
        std::string out;
        int status = decode_path(c.raw, out);
        EXPECT_EQ(status, c.status) << "raw: " << c.raw;
        if (status == 0 && c.status == 0) {
            EXPECT_EQ(out, c.expected) << "raw: " << c.raw;
        }
    }
}

// The invariant the file system layer relies on, over many generated paths.
TEST(DecodePath, InvariantOnGeneratedPaths) {
    const char alphabet[] = {'/', '/', '.', '.', 'a', '%', '2', 'e', 'E', 'f', '0', 'x'};
    std::mt19937 random(12345);
    int accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string raw = "/";
        size_t length = random() % 16;
        for (size_t j = 0; j < length; ++j)
            raw.push_back(alphabet[random() % sizeof alphabet]);
        std::string out;
        if (decode_path(raw, out) != 0) continue;
        ++accepted;
        ASSERT_FALSE(out.empty()) << raw;
        EXPECT_EQ(out[0], '/') << raw;
        EXPECT_EQ(out.find('\0'), std::string::npos) << raw;
        EXPECT_EQ(out.find("//"), std::string::npos) << raw;
        std::string padded = out + (out.back() == '/' ? "" : "/");
        EXPECT_EQ(padded.find("/../"), std::string::npos) << raw << " -> " << out;
        EXPECT_EQ(padded.find("/./"), std::string::npos) << raw << " -> " << out;
        // Idempotent once no '%' is left to decode.
        if (out.find('%') == std::string::npos) {
            std::string again;
            EXPECT_EQ(decode_path(out, again), 0);
            EXPECT_EQ(again, out);
        }
    }
    EXPECT_GT(accepted, 1000);
}

TEST(HiddenSegment, Detects) {
    EXPECT_TRUE(has_hidden_segment("/.git/config"));
    EXPECT_TRUE(has_hidden_segment("/a/.b"));
    EXPECT_TRUE(has_hidden_segment("/a/.b/"));
    EXPECT_FALSE(has_hidden_segment("/a.b/c"));
    EXPECT_FALSE(has_hidden_segment("/"));
    EXPECT_FALSE(has_hidden_segment("/a/b./"));
}

// RFC 8615 (issue 34): certbot --webroot and security.txt live there.
TEST(HiddenSegment, WellKnownAtTheRootIsPublic) {
    EXPECT_FALSE(has_hidden_segment("/.well-known/acme-challenge/token"));
    EXPECT_FALSE(has_hidden_segment("/.well-known/security.txt"));
    EXPECT_FALSE(has_hidden_segment("/.well-known"));
    EXPECT_FALSE(has_hidden_segment("/.well-known/"));
    EXPECT_TRUE(has_hidden_segment("/.well-known/.secret"));
    EXPECT_TRUE(has_hidden_segment("/.well-knownx/a"));
    EXPECT_TRUE(has_hidden_segment("/a/.well-known/x"));
}

TEST(PercentEncode, KeepsSlashesEncodesTheRest) {
    std::string out;
    append_percent_encoded("/a b/<x>\"&:'", out);
    EXPECT_EQ(out, "/a%20b/%3Cx%3E%22%26%3A%27");
    out.clear();
    append_percent_encoded("/caf\xC3\xA9/x-y_z~.txt\r\n", out);
    EXPECT_EQ(out, "/caf%C3%A9/x-y_z~.txt%0D%0A");
}

TEST(PercentEncode, RoundTripsThroughDecode) {
    std::string raw = "/";
    for (int c = 1; c < 256; ++c)
        if (c != '/' && c != '.') raw.push_back(char(c));
    std::string encoded, decoded;
    append_percent_encoded(raw, encoded);
    ASSERT_EQ(decode_path(encoded, decoded), 0);
    EXPECT_EQ(decoded, raw);
}

} // namespace
} // namespace lepus
