#include "base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

namespace lepus {
namespace {

bool is_open(int fd) {
    return fcntl(fd, F_GETFD) != -1;
}

TEST(UniqueFd, ClosesOnScopeExit) {
    int raw;
    {
        UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        raw = fd.get();
        ASSERT_TRUE(is_open(raw));
    }
    EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, MoveTransfersOwnership) {
    UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    int raw = a.get();
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_TRUE(is_open(raw));
    c.reset();
    EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, ReleaseDoesNotClose) {
    UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    int raw = a.release();
    EXPECT_TRUE(is_open(raw));
    ::close(raw);
}

} // namespace
} // namespace lepus
