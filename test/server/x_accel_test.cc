// parse_x_accel and the header lines a script keeps on the file it hands over.
#include "server/x_accel.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

TEST(XAccel, PrefixAndFolder) {
    std::string error;
    auto parsed = parse_x_accel("/protected/=/tmp/../tmp/", error);
    ASSERT_TRUE(parsed) << error;
    EXPECT_EQ(parsed->prefix, "/protected/");
    EXPECT_EQ(parsed->root, "/tmp"); // normalised, so X-Sendfile paths compare as text
    auto nested = parse_x_accel("/a/b/=/", error);
    ASSERT_TRUE(nested) << error;
    EXPECT_EQ(nested->root, "/");
}

TEST(XAccel, RefusesWhatIsNotPrefixEqualsFolder) {
    for (const char* text :
         {"/protected/", "protected/=/tmp", "/protected=/tmp", "/=/tmp", "/a/../b/=/tmp",
          "/a//b/=/tmp", "/%70/=/tmp", "/p/=", "/p/=/nonexistent-folder-of-lepus"}) {
        std::string error;
        EXPECT_FALSE(parse_x_accel(text, error)) << text;
        EXPECT_NE(error.find("x-accel"), std::string::npos) << text;
        EXPECT_EQ(error.find('\n'), std::string::npos) << text;
    }
}

TEST(XAccel, SafeTargets) {
    for (const char* uri :
         {"/protected/report.pdf", "/protected/a/b%20c.pdf", "/public.txt", "/protected/./x",
          "/protected//x", "/a/.../b", "/a/..b/c", "/%2e/x", "/protected/%41.txt"})
        EXPECT_EQ(unsafe_x_accel_path(uri, true), nullptr) << uri;
    // X-Sendfile's file names: a '%' is a byte of the name.
    EXPECT_EQ(unsafe_x_accel_path("/srv/files/100%2f.txt", false), nullptr);
}

TEST(XAccel, UnsafeTargets) {
    // nginx's "unsafe URI": what could climb out of the folder, or mean another path.
    for (const char* uri :
         {"protected/x", "", "/protected/../info.php", "/protected/..", "/..",
          "/protected/%2e%2e/x", "/protected/.%2E/x", "/protected/..%2finfo.php",
          "/protected/a%2Fb", "/protected\\x", "/protected/%5cx", "/protected/%00.txt",
          "/protected/%0d%0aX: y", "/protected/%", "/p/%4", "/p/%zz"})
        EXPECT_NE(unsafe_x_accel_path(uri, true), nullptr) << uri;
    using namespace std::string_view_literals;
    EXPECT_NE(unsafe_x_accel_path("/protected/a\0b"sv, true), nullptr);
    for (const char* path :
         {"/srv/files/../etc/passwd", "/srv/files/..", "/srv/files/a\\..", "srv/files/x"})
        EXPECT_NE(unsafe_x_accel_path(path, false), nullptr) << path;
}

TEST(XAccel, KeptHeaders) {
    EXPECT_TRUE(kept_on_x_accel("content-type"));
    EXPECT_TRUE(kept_on_x_accel("Content-Disposition"));
    EXPECT_TRUE(kept_on_x_accel("SET-COOKIE"));
    EXPECT_FALSE(kept_on_x_accel("X-Accel-Redirect"));
    EXPECT_FALSE(kept_on_x_accel("Content-Length"));
    EXPECT_FALSE(kept_on_x_accel("Location"));
}

TEST(XAccel, ScriptFieldsReplaceTheFilesAndJoinTheRest) {
    ResponseHead head;
    head.add("Content-Type", "text/plain");
    head.add("accept-ranges", "bytes");
    head.content_length = 3;
    ResponseHead kept;
    kept.add("Content-Type", "application/pdf");
    kept.add("Set-Cookie", "a=1");
    kept.add("Set-Cookie", "b=2");
    kept.add("Accept-Ranges", "none");
    replace_fields(kept, head);
    std::string lines;
    head.append_http1_fields(lines);
    EXPECT_EQ(lines, "Content-Type: application/pdf\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
                     "Accept-Ranges: none\r\n");
    EXPECT_EQ(head.content_length, 3u);
    replace_fields(ResponseHead(), head);
    std::string unchanged;
    head.append_http1_fields(unchanged);
    EXPECT_EQ(unchanged, lines);
}

} // namespace
} // namespace lepus
