// The free functions of static_handler.h: the errno mapping, Accept-Encoding and
// entity-tag list matching.
#include "http/static_handler.h"

#include <cerrno>
#include <gtest/gtest.h>

namespace lepus {
namespace {

TEST(StatusForErrno, OnePlace) {
    for (int e : {ENOENT, ENOTDIR, ENAMETOOLONG})
        EXPECT_EQ(status_for_errno(e), 404) << e;
    for (int e : {EACCES, ELOOP, EMLINK, EXDEV, ENXIO})
        EXPECT_EQ(status_for_errno(e), 403) << e;
    for (int e : {EIO, EMFILE, ENFILE, ENOMEM, 0})
        EXPECT_EQ(status_for_errno(e), 500) << e;
}

TEST(AcceptsGzip, Table) {
    EXPECT_TRUE(accepts_gzip("gzip"));
    EXPECT_TRUE(accepts_gzip("GZIP"));
    EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
    EXPECT_TRUE(accepts_gzip("br;q=1.0, gzip;q=0.8"));
    EXPECT_TRUE(accepts_gzip("gzip;q=0.001"));
    EXPECT_TRUE(accepts_gzip(" gzip ;Q=1"));
    EXPECT_FALSE(accepts_gzip(""));
    EXPECT_FALSE(accepts_gzip("deflate"));
    EXPECT_FALSE(accepts_gzip("gzipx"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0"));
    EXPECT_FALSE(accepts_gzip("gzip; q=0.0"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
}

TEST(EtagListMatches, Table) {
    const char* etag = "\"abc-1\"";
    EXPECT_TRUE(etag_list_matches("\"abc-1\"", etag, false));
    EXPECT_TRUE(etag_list_matches("\"x\", \"abc-1\"", etag, false));
    EXPECT_TRUE(etag_list_matches("*", etag, false));
    EXPECT_FALSE(etag_list_matches("W/\"abc-1\"", etag, false)) << "strong comparison";
    EXPECT_TRUE(etag_list_matches("W/\"abc-1\"", etag, true)) << "weak comparison";
    EXPECT_FALSE(etag_list_matches("\"abc\"", etag, true));
    EXPECT_FALSE(etag_list_matches("abc-1", etag, true)) << "unquoted: malformed";
    EXPECT_FALSE(etag_list_matches("\"abc-1", etag, true));
    EXPECT_FALSE(etag_list_matches("", etag, true));
}

} // namespace
} // namespace lepus
