#include "head_text.h"
#include "http/response.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

constexpr time_t kNow = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT

TEST(StatusReason, FromTheList) {
    EXPECT_EQ(status_reason(200), "OK");
    EXPECT_EQ(status_reason(404), "Not Found");
    EXPECT_EQ(status_reason(416), "Range Not Satisfiable");
    EXPECT_EQ(status_reason(431), "Request Header Fields Too Large");
    EXPECT_EQ(status_reason(505), "HTTP Version Not Supported");
    EXPECT_EQ(status_reason(999), "Unknown");
}

TEST(CommonHeaders, DateAndServer) {
    std::string head;
    append_common_headers(kNow, head);
    EXPECT_EQ(head, "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: lepus\r\n");
    append_common_headers(kNow + 1, head);
    EXPECT_EQ(head.substr(head.size() / 2),
              "Date: Sun, 06 Nov 1994 08:49:38 GMT\r\nServer: lepus\r\n");
}

TEST(ErrorResponse, NotFoundPage) {
    Response out;
    build_error_response(404, true, out);
    const std::string page = "<html><head><title>404 Not Found</title></head><body><h1>404 Not "
                             "Found</h1><hr>lepus</body></html>\n";
    EXPECT_EQ(out.head.status, 404);
    EXPECT_EQ(out.body, page);
    EXPECT_EQ(head_text(out, kNow), "HTTP/1.1 404 Not Found\r\n"
                                    "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: lepus\r\n"
                                    "Content-Type: text/html; charset=utf-8\r\n"
                                    "Content-Length: " +
                                        std::to_string(page.size()) + "\r\n\r\n");
    EXPECT_TRUE(out.keep_alive);
    EXPECT_EQ(out.file_fd, -1);
    EXPECT_EQ(out.body_bytes(), page.size());
}

TEST(ErrorResponse, EveryErrorStatusHasItsPage) {
    for (int status : {400, 403, 404, 405, 412, 413, 414, 416, 431, 500, 501, 503, 505, 599}) {
        Response out;
        build_error_response(status, true, out);
        std::string title = std::to_string(status) + " " + std::string(status_reason(status));
        EXPECT_EQ(head_text(out, kNow).rfind("HTTP/1.1 " + title + "\r\n", 0), 0u) << status;
        EXPECT_NE(out.body.find("<title>" + title + "</title>"), std::string::npos) << status;
        EXPECT_NE(head_text(out, kNow).find("Content-Length: " + std::to_string(out.body.size()) +
                                            "\r\n"),
                  std::string::npos);
    }
}

TEST(ErrorResponse, ConnectionHeader) {
    Response out;
    build_error_response(400, false, out);
    EXPECT_FALSE(out.keep_alive);
    EXPECT_NE(head_text(out, kNow).find("\r\nConnection: close\r\n\r\n"), std::string::npos);

    ReplyContext context;
    build_error_response(404, context, out);
    EXPECT_TRUE(out.keep_alive);
    EXPECT_NE(head_text(out, kNow, 0).find("\r\nConnection: keep-alive\r\n\r\n"),
              std::string::npos);

    build_error_response(404, context, out);
    EXPECT_EQ(head_text(out, kNow).find("Connection:"), std::string::npos);
}

TEST(ErrorResponse, HeadGetsHeadersWithoutBody) {
    ReplyContext context;
    context.head_request = true;
    Response out;
    build_error_response(405, context, out);
    out.head.add("Allow", "GET, HEAD, OPTIONS");
    EXPECT_TRUE(out.body.empty());
    EXPECT_EQ(out.body_bytes(), 0u);
    EXPECT_NE(head_text(out, kNow).find("\r\nAllow: GET, HEAD, OPTIONS\r\n"), std::string::npos);
    EXPECT_NE(head_text(out, kNow).find("\r\nContent-Length: "), std::string::npos);
}

TEST(ErrorResponse, NoBodyStatuses) {
    for (int status : {100, 204, 304}) {
        Response out;
        build_error_response(status, true, out);
        EXPECT_TRUE(out.body.empty()) << status;
        EXPECT_EQ(head_text(out, kNow).find("Content-Length"), std::string::npos) << status;
        EXPECT_EQ(head_text(out, kNow).substr(head_text(out, kNow).size() - 4), "\r\n\r\n");
    }
}

TEST(ResponseReset, KeepsCapacity) {
    Response out;
    build_error_response(404, false, out);
    out.reset();
    EXPECT_EQ(out.head.field_count(), 0u);
    EXPECT_EQ(out.head.content_length, std::nullopt);
    EXPECT_TRUE(out.body.empty());
    EXPECT_EQ(out.head.status, 0);
    EXPECT_TRUE(out.keep_alive);
    EXPECT_EQ(out.file_fd, -1);
    EXPECT_FALSE(out.file);
}

} // namespace
} // namespace lepus
