// The htpasswd parser: what it takes, what it refuses (and says why), lookups.
#include "server/htpasswd.h"

#include <crypt.h>
#include <gtest/gtest.h>

namespace lepus {
namespace {

// Made with `htpasswd -nbB -C 5 bob secret`.
constexpr std::string_view kBob = "$2y$05$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC";

std::unique_ptr<Htpasswd> parse(std::string_view text, std::string& error) {
    return Htpasswd::parse(text, "pw", error);
}

TEST(Htpasswd, TakesBcryptAndSkipsCommentsAndBlankLines) {
    std::string text = "# admins\n\nbob:" + std::string(kBob) + "\r\n" +
                       "amy:$2b$05$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC";
    std::string error;
    auto file = parse(text, error);
    ASSERT_TRUE(file) << error;
    EXPECT_EQ(file->size(), 2u);
    ASSERT_TRUE(file->find("bob"));
    EXPECT_EQ(file->find("bob")->hash, kBob); // the CR is gone
    EXPECT_TRUE(file->find("amy"));
    EXPECT_FALSE(file->find("bo"));
    EXPECT_FALSE(file->find("Bob")); // user names are case-sensitive, as in Apache
    EXPECT_FALSE(file->find(""));
}

TEST(Htpasswd, TheHashChecksWithCryptR) {
    std::string error;
    auto file = parse("bob:" + std::string(kBob) + "\n", error);
    ASSERT_TRUE(file) << error;
    crypt_data data{};
    const char* right = crypt_r("secret", file->find("bob")->hash.c_str(), &data);
    ASSERT_TRUE(right);
    EXPECT_EQ(std::string_view(right), kBob);
    const char* wrong = crypt_r("Secret", file->find("bob")->hash.c_str(), &data);
    EXPECT_NE(std::string_view(wrong ? wrong : ""), kBob);
}

TEST(Htpasswd, FirstLineOfAUserWins) {
    std::string other(kBob);
    other[20] = 'x';
    std::string error;
    auto file = parse("bob:" + std::string(kBob) + "\nbob:" + other + "\n", error);
    ASSERT_TRUE(file) << error;
    EXPECT_EQ(file->find("bob")->hash, kBob);
}

TEST(Htpasswd, TakesYescryptAndSha512Crypt) {
    // `openssl passwd -6 -salt saltsalt x`; yescrypt from crypt_gensalt("$y$").
    std::string error;
    for (std::string_view hash :
         {"$6$saltsalt$8RWsOfwR6M6PpnoeQiEiWzNTPo1f0HjVYjDnLZhGx16aBFRkeqiHAzfXP/"
          "LgrOWMBMXqiU2pLrXsS"
          "OHNUyUm91",
          "$y$j9T$1sJfggbgUQAFV0I126Z081$uXzEGM8X9IzkI6GIHnD6XAOdKMdAAGFDeP4xGUZnpE8"}) {
        auto file = parse("a:" + std::string(hash) + "\n", error);
        ASSERT_TRUE(file) << error;
        crypt_data data{};
        const char* checked = crypt_r("x", file->find("a")->hash.c_str(), &data);
        EXPECT_EQ(std::string_view(checked ? checked : ""), hash);
    }
}

TEST(Htpasswd, RefusesWeakHashesNamingTheLine) {
    struct Case {
        std::string_view line, says;
    } cases[] = {
        {"bob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "{SHA}"},
        {"bob:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00", "MD5"},
        {"bob:$1$abc$xyz", "MD5"},
        {"bob:abJnggxhB/yWI", "DES"},
        {"bob:secret", "plain-text"},
        {"bob:$2y$05$short", "malformed bcrypt"},
        {"bob:$2y$03$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC", "bcrypt"},
        {"bob:$2x$05$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC", "bcrypt"},
        {"bob:$7$unknown", "unknown"},
        {"bob:$5$saltsalt$hcyDOxdIg0p3xyqtpHh/v8Ph.am06tQaovp1KpEklb7", "legacy"},
        {"bob:", "plain-text"},
    };
    for (const Case& c : cases) {
        std::string error;
        std::string text = "# first\n" + std::string(c.line) + "\n";
        EXPECT_FALSE(parse(text, error)) << c.line;
        EXPECT_TRUE(error.starts_with("pw:2: user 'bob': ")) << error;
        EXPECT_NE(error.find(c.says), std::string::npos) << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
    }
}

TEST(Htpasswd, RefusesLinesWithoutUser) {
    std::string error;
    EXPECT_FALSE(parse("no colon here\n", error));
    EXPECT_EQ(error, "pw:1: not a \"user:hash\" line");
    EXPECT_FALSE(parse(":" + std::string(kBob) + "\n", error));
    EXPECT_EQ(error, "pw:1: not a \"user:hash\" line");
}

TEST(Htpasswd, AnEmptyFileHasNobody) {
    std::string error;
    auto file = parse("# nobody yet\n", error);
    ASSERT_TRUE(file) << error;
    EXPECT_EQ(file->size(), 0u);
    EXPECT_FALSE(file->any());
}

TEST(Htpasswd, LoadNamesAMissingFile) {
    std::string error;
    EXPECT_FALSE(Htpasswd::load("/nonexistent/htpasswd", error));
    EXPECT_EQ(error, "/nonexistent/htpasswd: No such file or directory");
}

} // namespace
} // namespace lepus
