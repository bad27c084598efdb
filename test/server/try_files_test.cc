// parse_try_files and the expansion of a candidate's $uri and query.
#include "server/try_files.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

TEST(TryFiles, FrontControllerInOneWordOrMany) {
    std::string error;
    auto one = parse_try_files({"$uri $uri/ /index.php?$query_string"}, error);
    auto many = parse_try_files({"$uri", "$uri/", "/index.php?$query_string"}, error);
    ASSERT_TRUE(one && many) << error;
    ASSERT_EQ(one->candidates.size(), 3u);
    ASSERT_EQ(many->candidates.size(), 3u);
    const TryFiles::Candidate& fallback = one->candidates.back();
    EXPECT_EQ(fallback.path, "/index.php");
    EXPECT_TRUE(fallback.has_query);
    std::string out;
    TryFiles::expand_query(fallback, "/blog", "a=1&b=2", out);
    EXPECT_EQ(out, "a=1&b=2");
    TryFiles::expand_path(one->candidates[1], "/blog/post", out);
    EXPECT_EQ(out, "/blog/post/");
}

TEST(TryFiles, ArgsAndFixedQueries) {
    std::string error;
    auto parsed = parse_try_files({"$uri.html", "/app.php?route=$uri&$args"}, error);
    ASSERT_TRUE(parsed) << error;
    std::string out;
    TryFiles::expand_path(parsed->candidates[0], "/about", out);
    EXPECT_EQ(out, "/about.html");
    TryFiles::expand_query(parsed->candidates[1], "/a b&c=d", "x=1", out);
    EXPECT_EQ(out, "route=/a%20b%26c%3Dd&x=1"); // $uri: the decoded path, one value
}

// nginx decides "folder or file" from the template, not from the expanded
// path: "$uri" for "/apps/files/" is a file test (issue 37).
TEST(TryFiles, FolderTestFromTheTemplate) {
    std::string error;
    auto parsed = parse_try_files({"$uri $uri/ /static/ /index.php$uri"}, error);
    ASSERT_TRUE(parsed) << error;
    EXPECT_FALSE(parsed->candidates[0].wants_directory());
    EXPECT_TRUE(parsed->candidates[1].wants_directory());
    EXPECT_TRUE(parsed->candidates[2].wants_directory());
    std::string expanded;
    TryFiles::expand_path(parsed->candidates[0], "/apps/files/", expanded);
    EXPECT_EQ(expanded, "/apps/files/");
    EXPECT_FALSE(parse_try_files({"/ =404"}, error)->candidates[0].wants_directory());
}

TEST(TryFiles, StatusOnlyLast) {
    std::string error;
    auto parsed = parse_try_files({"$uri", "=404"}, error);
    ASSERT_TRUE(parsed) << error;
    EXPECT_EQ(parsed->candidates.back().status, 404);
    EXPECT_FALSE(parse_try_files({"=404", "$uri"}, error));
    EXPECT_NE(error.find("can only come last"), std::string::npos) << error;
}

TEST(TryFiles, Refusals) {
    std::string error;
    EXPECT_FALSE(parse_try_files({"$uri"}, error));
    EXPECT_FALSE(parse_try_files({"$uri", "index.php"}, error));
    EXPECT_FALSE(parse_try_files({"$uri", "=abc"}, error));
    EXPECT_FALSE(parse_try_files({"$uri", "=700"}, error));
    EXPECT_FALSE(parse_try_files({"$uri?x=1", "/index.php"}, error));
    EXPECT_FALSE(parse_try_files({"$uri", "/../secret.php"}, error));
    EXPECT_FALSE(parse_try_files({"   "}, error));
}

} // namespace
} // namespace lepus
