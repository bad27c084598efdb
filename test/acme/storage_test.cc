#include "acme/storage.h"
#include "support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace lepus::acme {
namespace {

unsigned mode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? unsigned(st.st_mode & 07777) : 0u;
}

TEST(Storage, FoldersAre0700AndFiles0600) {
    test::TempDir dir("acme");
    std::string error;
    ASSERT_TRUE(make_private_folder(dir.file("state/certificates/example.org"), error)) << error;
    EXPECT_EQ(mode_of(dir.file("state")), 0700u);
    EXPECT_EQ(mode_of(dir.file("state/certificates/example.org")), 0700u);
    std::string path = dir.file("state/certificates/example.org/privkey.pem");
    ASSERT_TRUE(write_private_file(path, "secret", error)) << error;
    EXPECT_EQ(mode_of(path), 0600u);
    std::string content;
    ASSERT_TRUE(read_whole_file(path, content));
    EXPECT_EQ(content, "secret");
    ASSERT_TRUE(write_private_file(path, "replaced", error));
    ASSERT_TRUE(read_whole_file(path, content));
    EXPECT_EQ(content, "replaced");
    EXPECT_FALSE(write_private_file(dir.file("missing/folder/file"), "x", error));
    EXPECT_NE(error.find("missing/folder/file"), std::string::npos);
}

TEST(Storage, NamesCannotClimbOutOfTheStateFolder) {
    EXPECT_EQ(certificate_paths("/s", {"Example.ORG", "www.example.org"}).chain,
              "/s/certificates/example.org/fullchain.pem");
    EXPECT_EQ(certificate_paths("/s", {"../etc"}).folder, "/s/certificates/_.._etc");
    EXPECT_EQ(certificate_paths("/s", {"a/b"}).key, "/s/certificates/a_b/privkey.pem");
    EXPECT_EQ(account_key_path("/s", "https://localhost:14000/dir"),
              "/s/acme/accounts/localhost_14000/account.key");
}

} // namespace
} // namespace lepus::acme
