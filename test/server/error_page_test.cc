#include "server/error_page.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace lepus {
namespace {

// The head as the HTTP/1.1 engine writes it.
std::string text(const Response& response) {
    std::string out;
    write_http1_head(response.head, 1700000000, response.keep_alive, 1, out);
    return out;
}

class ErrorPageTest : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/lepus-error-page-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        root_ = pattern;
        write("404.html", "<p>not here</p>\n");
        std::filesystem::create_directory(root_ + "/errors");
        StaticOptions options;
        options.root = root_;
        std::string error;
        files_ = StaticHandler::create(options, error);
        ASSERT_TRUE(files_) << error;
    }
    void TearDown() override { std::filesystem::remove_all(root_); }

    void write(const std::string& name, const std::string& content) {
        std::ofstream(root_ + "/" + name) << content;
    }

    // A request as the parser would leave it (views into literals).
    static Request request(Method method = Method::Get) {
        Request r;
        r.method = method;
        r.method_text = method_name(method);
        r.target = r.path = "/missing";
        r.host = "example.test";
        r.if_none_match = "\"abc\"";
        r.range = "bytes=0-1";
        return r;
    }

    // `extra`: a field the error carries ({name, value}), or none.
    Response error(int status, bool head = false, Header extra = {}) {
        Response out;
        ReplyContext context{true, head};
        build_error_response(status, context, out);
        if (!extra.name.empty()) out.head.add(extra.name, extra.value);
        return out;
    }

    std::string root_;
    std::unique_ptr<StaticHandler> files_;
    Response scratch_;
};

TEST_F(ErrorPageTest, ServesThePageWithTheOriginalStatus) {
    Response response = error(404);
    ASSERT_TRUE(apply_error_page(*files_, request(), "/404.html", 0, response, scratch_));
    EXPECT_EQ(response.head.status, 404);
    EXPECT_TRUE(text(response).starts_with("HTTP/1.1 404 Not Found\r\n")) << text(response);
    EXPECT_NE(text(response).find("Content-Type: text/html"), std::string::npos);
    EXPECT_NE(text(response).find("Content-Length: 16\r\n"), std::string::npos) << text(response);
    // Validators and ranges describe the page, not the error.
    EXPECT_EQ(text(response).find("ETag"), std::string::npos);
    EXPECT_EQ(text(response).find("Last-Modified"), std::string::npos);
    EXPECT_EQ(text(response).find("Accept-Ranges"), std::string::npos);
    EXPECT_EQ(text(response).find("Content-Length", text(response).find("Content-Length") + 1),
              std::string::npos);
    EXPECT_TRUE(text(response).ends_with("\r\n\r\n"));
    EXPECT_EQ(std::string(response.body), "<p>not here</p>\n");
    EXPECT_TRUE(response.keep_alive);
}

TEST_F(ErrorPageTest, KeepsTheExtraHeadersOfTheError) {
    Response response = error(405, false, {"Allow", "GET, HEAD, OPTIONS"});
    ASSERT_TRUE(
        apply_error_page(*files_, request(Method::Delete), "/404.html", 0, response, scratch_));
    EXPECT_TRUE(text(response).starts_with("HTTP/1.1 405 "));
    EXPECT_NE(text(response).find("Allow: GET, HEAD, OPTIONS\r\n"), std::string::npos);
    EXPECT_EQ(std::string(response.body), "<p>not here</p>\n");
}

TEST_F(ErrorPageTest, HeadGetsTheHeadOnly) {
    Response response = error(404, true);
    ASSERT_TRUE(
        apply_error_page(*files_, request(Method::Head), "/404.html", 0, response, scratch_));
    EXPECT_NE(text(response).find("Content-Length: 16\r\n"), std::string::npos);
    EXPECT_TRUE(response.body.empty());
    EXPECT_EQ(response.file_length, 0u);
}

TEST_F(ErrorPageTest, MissingOrUnservablePageLeavesTheBuiltInOne) {
    for (std::string_view page : {"/nope.html", "/errors", "/errors/", "/../etc/passwd"}) {
        Response response = error(404);
        std::string before = text(response);
        std::string body(response.body);
        EXPECT_FALSE(apply_error_page(*files_, request(), page, 0, response, scratch_)) << page;
        EXPECT_EQ(text(response), before);
        EXPECT_EQ(std::string(response.body), body);
        EXPECT_NE(body.find("404 Not Found"), std::string::npos);
    }
}

TEST_F(ErrorPageTest, LargePageGoesBySendfile) {
    write("big.html", std::string(100000, 'x'));
    Response response = error(503, false, {"Retry-After", "1"});
    ASSERT_TRUE(apply_error_page(*files_, request(), "/big.html", 0, response, scratch_));
    EXPECT_TRUE(text(response).starts_with("HTTP/1.1 503 "));
    EXPECT_NE(text(response).find("Retry-After: 1\r\n"), std::string::npos);
    EXPECT_NE(text(response).find("Content-Length: 100000\r\n"), std::string::npos);
    EXPECT_EQ(response.body_bytes(), 100000u);
}

} // namespace
} // namespace lepus
