#include "http/open_beneath.h"
#include "support/temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus {
namespace {

class OpenBeneathTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(temp_.ok());
        base_ = temp_.path();
        std::string root = base_ + "/root";
        std::filesystem::create_directories(root + "/docs");
        std::ofstream(root + "/hello.txt") << "hello";
        std::ofstream(root + "/docs/index.html") << "docs";
        std::ofstream(base_ + "/outside.txt") << "outside";
        symlink((base_ + "/outside.txt").c_str(), (root + "/link_out").c_str());
        symlink("../outside.txt", (root + "/link_up").c_str());
        symlink("/etc", (root + "/link_etc").c_str());
        symlink("hello.txt", (root + "/link_in").c_str());
        symlink("docs", (root + "/link_dir").c_str());
        symlink("/proc/self/root", (root + "/magic").c_str());
        root_.reset(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        ASSERT_TRUE(root_);
    }

    // 0 on success, else the errno of the failed open.
    int open_with(ConfineMode mode, const char* path) {
        errno = 0;
        UniqueFd fd = open_beneath(root_.get(), path, O_RDONLY | O_NONBLOCK, mode);
        if (!fd) return errno;
        EXPECT_NE(fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0) << path;
        return 0;
    }

    test::TempDir temp_{"beneath"};
    std::string base_;
    UniqueFd root_;
};

TEST_F(OpenBeneathTest, Openat2FollowsOnlyLinksThatStayInside) {
    EXPECT_EQ(open_with(ConfineMode::Auto, "hello.txt"), 0);
    EXPECT_EQ(open_with(ConfineMode::Auto, "docs/index.html"), 0);
    EXPECT_EQ(open_with(ConfineMode::Auto, "."), 0);
    EXPECT_EQ(open_with(ConfineMode::Auto, "link_in"), 0);
    EXPECT_EQ(open_with(ConfineMode::Auto, "link_dir/index.html"), 0);
    EXPECT_EQ(open_with(ConfineMode::Auto, "missing"), ENOENT);
    EXPECT_EQ(open_with(ConfineMode::Auto, "link_out"), EXDEV);
    EXPECT_EQ(open_with(ConfineMode::Auto, "link_up"), EXDEV);
    EXPECT_EQ(open_with(ConfineMode::Auto, "link_etc/passwd"), EXDEV);
    EXPECT_EQ(open_with(ConfineMode::Auto, "../root/hello.txt"), EXDEV);
    int magic = open_with(ConfineMode::Auto, "magic/etc/passwd");
    EXPECT_TRUE(magic == EXDEV || magic == ELOOP) << magic;
}

// The fallback for kernels without openat2 refuses every symlink.
TEST_F(OpenBeneathTest, WalkRefusesEverySymlinkAndDotDot) {
    EXPECT_EQ(open_with(ConfineMode::Walk, "hello.txt"), 0);
    EXPECT_EQ(open_with(ConfineMode::Walk, "docs/index.html"), 0);
    EXPECT_EQ(open_with(ConfineMode::Walk, "."), 0);
    EXPECT_EQ(open_with(ConfineMode::Walk, "missing"), ENOENT);
    EXPECT_EQ(open_with(ConfineMode::Walk, "hello.txt/x"), ENOTDIR);
    EXPECT_EQ(open_with(ConfineMode::Walk, "link_in"), ELOOP);
    EXPECT_EQ(open_with(ConfineMode::Walk, "link_out"), ELOOP);
    EXPECT_EQ(open_with(ConfineMode::Walk, "link_etc/passwd"), ELOOP);
    EXPECT_EQ(open_with(ConfineMode::Walk, "link_dir/index.html"), ELOOP);
    EXPECT_EQ(open_with(ConfineMode::Walk, "docs/../hello.txt"), EXDEV);
    EXPECT_EQ(open_with(ConfineMode::Walk, "../root/hello.txt"), EXDEV);
}

// --symlinks owner: the walk that reads each link through its own descriptor.
TEST_F(OpenBeneathTest, OwnerFollowsLinksOfTheTargetsOwner) {
    auto open_owner = [&](const char* path, int flags = O_RDONLY | O_NONBLOCK) {
        errno = 0;
        UniqueFd fd = open_confined(root_.get(), path, flags, SymlinkPolicy::Owner);
        return fd ? 0 : errno;
    };
    // All of the fixture has one owner: links in and out are followed.
    for (const char* path : {"hello.txt", "docs/index.html", ".", "docs/", "link_in",
                             "link_dir/index.html", "link_dir/", "link_out", "link_up"})
        EXPECT_EQ(open_owner(path), 0) << path;
    EXPECT_EQ(open_owner("link_in", O_PATH), 0);
    EXPECT_EQ(open_owner("missing"), ENOENT);
    EXPECT_EQ(open_owner("hello.txt/x"), ENOTDIR);
    EXPECT_EQ(open_owner("link_in/"), ENOTDIR);
    // /proc links say nothing true about what they open: refused.
    EXPECT_EQ(open_owner("magic/etc/passwd"), ELOOP);
    std::string root = base_ + "/root";
    symlink("loop", (root + "/loop").c_str());
    EXPECT_EQ(open_owner("loop"), ELOOP);
    // What is served is what was checked: the descriptor opened.
    UniqueFd fd = open_confined(root_.get(), "link_dir/index.html", O_RDONLY, SymlinkPolicy::Owner);
    char text[8] = {};
    ASSERT_TRUE(fd);
    EXPECT_EQ(read(fd.get(), text, sizeof text), 4);
    EXPECT_STREQ(text, "docs");
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file another owner";
    ASSERT_EQ(lchown((base_ + "/outside.txt").c_str(), 65534, 65534), 0);
    EXPECT_EQ(open_owner("link_out"), ELOOP);
    EXPECT_EQ(open_owner("link_up"), ELOOP);
    ASSERT_EQ(lchown((root + "/link_out").c_str(), 65534, 65534), 0);
    EXPECT_EQ(open_owner("link_out"), 0);
    // A chain: each link must have its own target's owner.
    symlink("link_out", (root + "/to_link_out").c_str()); // root's link to nobody's link
    EXPECT_EQ(open_owner("to_link_out"), ELOOP);
}

} // namespace
} // namespace lepus
