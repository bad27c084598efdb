// Access-log formats other than Combined (src/log/access_log_format.cc).
#include "log/access_log_format.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

AccessLogEntry entry() {
    AccessLogEntry e{};
    e.remote_addr = "192.0.2.7";
    e.time = 0;
    e.method = "GET";
    e.target = "/a?b=1";
    e.protocol = "HTTP/1.1";
    e.status = 200;
    e.bytes_sent = 612;
    e.user_agent = "ua \"x\"\x01\xc3";
    return e;
}

TEST(AccessLogFormat, TextWithVariablesCompiledOnce) {
    std::string error;
    auto format = AccessLogFormat::compile(
        "$remote_addr ${host}: \"$request\" $status $body_bytes_sent $request_time "
        "$upstream_response_time \"$http_user_agent\" $http2",
        error);
    ASSERT_TRUE(format) << error;
    EXPECT_EQ(format->kind(), AccessLogFormat::Kind::Custom);
    AccessLogExtras extras{.host = "example.com", .request_time_ms = 1042, .http2 = "h2"};
    std::string line;
    format->append(entry(), extras, line);
    EXPECT_EQ(line, "192.0.2.7 example.com: \"GET /a?b=1 HTTP/1.1\" 200 612 1.042 - "
                    "\"ua \\x22x\\x22\\x01\\xC3\" h2\n");
}

TEST(AccessLogFormat, UnknownVariablesAndNewlinesAreRefused) {
    std::string error;
    EXPECT_FALSE(AccessLogFormat::compile("$remote_addr $nope", error));
    EXPECT_NE(error.find("'$nope'"), std::string::npos);
    EXPECT_FALSE(AccessLogFormat::compile("${host", error));
    EXPECT_FALSE(AccessLogFormat::compile("$host\n$status", error));
    ASSERT_TRUE(AccessLogFormat::compile("combined", error));
    EXPECT_EQ(AccessLogFormat::compile("combined", error)->kind(), AccessLogFormat::Kind::Combined);
}

TEST(AccessLogFormat, CombinedIsTheCombinedLine) {
    std::string error, line, expected;
    AccessLogFormat::compile("combined", error)->append(entry(), {}, line);
    append_combined_line(entry(), expected);
    EXPECT_EQ(line, expected);
}

TEST(AccessLogFormat, JsonEscapesEveryByteAJsonParserWouldRefuse) {
    std::string error, line;
    auto format = AccessLogFormat::compile("json", error);
    ASSERT_TRUE(format);
    format->append(entry(), {.host = "h", .upstream_time_ms = 5}, line);
    EXPECT_NE(line.find(R"("user_agent":"ua \u0022x\u0022\u0001\u00c3")"), std::string::npos)
        << line;
    EXPECT_NE(line.find(R"("status":200,"body_bytes_sent":612,"request_time":0.000,)"
                        R"("upstream_response_time":0.005)"),
              std::string::npos)
        << line;
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
}

} // namespace
} // namespace lepus
