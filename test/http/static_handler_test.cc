#include "head_text.h"
#include "http/http_date.h"
#include "http/static_handler.h"
#include "support/temp_dir.h"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <grp.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace lepus {
namespace {

constexpr time_t kNow = 1800000000;
constexpr time_t kMtime = 1700000000; // Tue, 14 Nov 2023 22:13:20 GMT
const std::string kHello = "hello world\n";

std::string http_date(time_t t) {
    char buffer[kHttpDateLength];
    format_http_date(t, buffer);
    return std::string(buffer, kHttpDateLength);
}

// The value of header `name` in a response head, or "<absent>".
std::string header(const Response& response, const std::string& name) {
    std::string needle = "\r\n" + name + ": ";
    std::string text = head_text(response, kNow);
    size_t start = text.find(needle);
    if (start == std::string::npos) return "<absent>";
    start += needle.size();
    return text.substr(start, text.find("\r\n", start) - start);
}

// Everything the client would receive as the body.
std::string payload(const Response& response) {
    std::string data(response.body);
    if (response.file_fd >= 0) {
        std::string file(response.file_length, '\0');
        EXPECT_EQ(pread(response.file_fd, file.data(), file.size(), off_t(response.file_offset)),
                  ssize_t(file.size()));
        data += file;
    }
    return data;
}

class StaticHandlerTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(temp_.ok());
        base_ = temp_.path();
        root_ = base_ + "/root";
        std::filesystem::create_directories(root_ + "/docs");
        std::filesystem::create_directories(root_ + "/empty");
        std::filesystem::create_directories(root_ + "/sub dir/nested");
        std::filesystem::create_directories(root_ + "/.git");
        std::filesystem::create_directories(base_ + "/outside");
        write("hello.txt", kHello);
        write("docs/index.html", "<p>docs</p>");
        write("sub dir/<a&b>.txt", "x");
        write("sub dir/b.txt", "bb");
        write("sub dir/.hidden", "h");
        write(".secret", "secret");
        write(".git/config", "[core]");
        write("style.css", "body{}");
        write("style.css.gz", "\x1f\x8b-not-really-gzip");
        write("empty.txt", "");
        big_.resize(64 * 1024);
        for (size_t i = 0; i < big_.size(); ++i)
            big_[i] = char('a' + i * 7 % 26);
        write("big.bin", big_);
        std::ofstream(base_ + "/outside/secret.txt") << "outside";
        symlink((base_ + "/outside/secret.txt").c_str(), (root_ + "/link_out").c_str());
        symlink("../outside/secret.txt", (root_ + "/link_up").c_str());
        symlink("/etc", (root_ + "/link_etc").c_str());
        symlink("hello.txt", (root_ + "/link_in").c_str());
        symlink("docs", (root_ + "/link_dir").c_str());
        mkfifo((root_ + "/fifo").c_str(), 0644);
        set_mtime("hello.txt", kMtime);
        options_.root = root_;
        options_.small_file_limit = 16 * 1024; // big.bin (64 KiB) goes by sendfile
    }

    void write(const std::string& name, const std::string& contents) {
        std::ofstream(root_ + "/" + name, std::ios::binary | std::ios::trunc) << contents;
    }
    void set_mtime(const std::string& name, time_t mtime) {
        struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
        ASSERT_EQ(utimensat(AT_FDCWD, (root_ + "/" + name).c_str(), times, 0), 0);
    }

    StaticHandler& handler() {
        if (!handler_) {
            std::string error;
            handler_ = StaticHandler::create(options_, error);
            EXPECT_TRUE(handler_) << error;
        }
        return *handler_;
    }

    // Runs one request; `setup` may fill the request's header fields.
    const Response& get(std::string_view path, Method method = Method::Get,
                        const std::function<void(Request&)>& setup = {}, bool keep_alive = true) {
        Request request;
        request.method = method;
        request.path = path;
        request.target = path;
        if (setup) setup(request);
        handler().handle(request, keep_alive, now_ms_, response_);
        return response_;
    }

    test::TempDir temp_{"static"};
    std::string base_, root_, big_;
    StaticOptions options_;
    std::unique_ptr<StaticHandler> handler_;
    Response response_;
    uint64_t now_ms_ = 1000;
};

TEST_F(StaticHandlerTest, CreateRefusesMissingRootOrFile) {
    std::string error;
    StaticOptions options;
    options.root = base_ + "/missing";
    EXPECT_FALSE(StaticHandler::create(options, error));
    EXPECT_NE(error.find("missing"), std::string::npos);
    options.root = root_ + "/hello.txt";
    EXPECT_FALSE(StaticHandler::create(options, error));
}

TEST_F(StaticHandlerTest, GetSmallFile) {
    const Response& r = get("/hello.txt");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(head_text(r, kNow).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
    EXPECT_EQ(header(r, "Date"), http_date(kNow));
    EXPECT_EQ(header(r, "Server"), "lepus");
    EXPECT_EQ(header(r, "Content-Type"), "text/plain; charset=utf-8");
    EXPECT_EQ(header(r, "Content-Length"), "12");
    EXPECT_EQ(header(r, "Last-Modified"), "Tue, 14 Nov 2023 22:13:20 GMT");
    EXPECT_EQ(header(r, "ETag"), "\"6553f100-c\"");
    EXPECT_EQ(header(r, "Accept-Ranges"), "bytes");
    EXPECT_EQ(header(r, "Connection"), "<absent>");
    EXPECT_EQ(header(r, "Vary"), "<absent>");
    EXPECT_TRUE(head_text(r, kNow).ends_with("\r\n\r\n"));
    EXPECT_EQ(r.body, kHello);
    EXPECT_EQ(r.file_fd, -1) << "small files are sent from memory";
    EXPECT_TRUE(r.file);
    EXPECT_EQ(r.body_bytes(), 12u);
}

TEST_F(StaticHandlerTest, BigFileGoesBySendfile) {
    const Response& r = get("/big.bin");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(header(r, "Content-Type"), "application/octet-stream");
    EXPECT_EQ(header(r, "Content-Length"), "65536");
    EXPECT_TRUE(r.body.empty());
    EXPECT_GE(r.file_fd, 0);
    EXPECT_EQ(r.file_offset, 0u);
    EXPECT_EQ(r.file_length, 65536u);
    EXPECT_EQ(r.body_bytes(), 65536u);
    EXPECT_EQ(payload(r), big_);
}

TEST_F(StaticHandlerTest, FilesUnderTheLimitComeFromMemoryUntilTheBudgetIsSpent) {
    options_.small_file_limit = 128 * 1024;
    options_.memory_budget = 100 * 1024;
    write("second.bin", big_);
    const Response& first = get("/big.bin");
    EXPECT_EQ(first.head.status, 200);
    EXPECT_EQ(first.file_fd, -1) << "64 KiB < 128 KiB: from memory, one writev";
    EXPECT_EQ(first.body, big_);
    // 64 KiB more would pass the 100 KiB budget: this one keeps only its fd.
    const Response& second = get("/second.bin");
    EXPECT_EQ(second.head.status, 200);
    EXPECT_TRUE(second.body.empty());
    EXPECT_GE(second.file_fd, 0);
    EXPECT_EQ(payload(second), big_);
    // The first is still served from memory.
    EXPECT_EQ(get("/big.bin").body, big_);
}

TEST_F(StaticHandlerTest, EmptyFile) {
    const Response& r = get("/empty.txt");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(header(r, "Content-Length"), "0");
    EXPECT_EQ(r.body_bytes(), 0u);
    EXPECT_EQ(r.file_fd, -1);
}

TEST_F(StaticHandlerTest, HeadHasHeadersWithoutBody) {
    const Response& r = get("/big.bin", Method::Head);
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(header(r, "Content-Length"), "65536");
    EXPECT_TRUE(r.body.empty());
    EXPECT_EQ(r.file_fd, -1);
    EXPECT_EQ(r.body_bytes(), 0u);
    const Response& small = get("/hello.txt", Method::Head);
    EXPECT_EQ(header(small, "Content-Length"), "12");
    EXPECT_EQ(small.body_bytes(), 0u);
    const Response& missing = get("/missing", Method::Head);
    EXPECT_EQ(missing.head.status, 404);
    EXPECT_TRUE(missing.body.empty());
}

TEST_F(StaticHandlerTest, OptionsAndOtherMethods) {
    const Response& options = get("/hello.txt", Method::Options);
    EXPECT_EQ(options.head.status, 204);
    EXPECT_EQ(header(options, "Allow"), "GET, HEAD, OPTIONS");
    EXPECT_TRUE(options.body.empty());
    EXPECT_EQ(header(options, "Content-Length"), "<absent>");
    EXPECT_EQ(get("*", Method::Options).head.status, 204);
    for (Method method : {Method::Post, Method::Put, Method::Delete, Method::Patch}) {
        const Response& r = get("/hello.txt", method);
        EXPECT_EQ(r.head.status, 405);
        EXPECT_EQ(header(r, "Allow"), "GET, HEAD, OPTIONS");
        EXPECT_NE(r.body.find("405 Method Not Allowed"), std::string::npos);
    }
}

// RFC 9110 §15.6.2 and §15.5.6: an extension method (PROPFIND) nothing on the
// site implements is 501; where a backend of the site may take it, the files
// know it and do not allow it: 405 with Allow (issue 37).
TEST_F(StaticHandlerTest, ExtensionMethodIs501OrWithABackend405) {
    auto propfind = [](Request& request) { request.method_text = "PROPFIND"; };
    const Response& alone = get("/hello.txt", Method::Extension, propfind);
    EXPECT_EQ(alone.head.status, 501);
    EXPECT_EQ(header(alone, "Allow"), "<absent>");
    options_.backend_methods = true;
    handler_.reset();
    for (const char* path : {"/hello.txt", "/missing.txt", "/docs/"}) {
        const Response& r = get(path, Method::Extension, propfind);
        EXPECT_EQ(r.head.status, 405) << path;
        EXPECT_EQ(header(r, "Allow"), "GET, HEAD, OPTIONS");
    }
    EXPECT_EQ(get("/hello.txt").head.status, 200);
}

TEST_F(StaticHandlerTest, BadPaths) {
    for (const char* path :
         {"/a/../../b", "/..", "/%2e%2e/etc/passwd", "/hello%00.txt", "/%zz", "relative"}) {
        EXPECT_EQ(get(path).head.status, 400) << path;
    }
    // Normalisation still finds the file.
    EXPECT_EQ(get("//docs/..//hello.txt").head.status, 200);
    EXPECT_EQ(get("/hello%2etxt").head.status, 200);
}

TEST_F(StaticHandlerTest, NotFoundPage) {
    const Response& r = get("/nope.html");
    EXPECT_EQ(r.head.status, 404);
    EXPECT_EQ(r.body, "<html><head><title>404 Not Found</title></head><body><h1>404 Not "
                      "Found</h1><hr>lepus</body></html>\n");
    EXPECT_EQ(get("/hello.txt/").head.status, 404) << "a file named as a directory";
    EXPECT_EQ(get("/hello.txt/x").head.status, 404);
    EXPECT_EQ(get("/" + std::string(300, 'n')).head.status, 404) << "ENAMETOOLONG";
}

TEST_F(StaticHandlerTest, DirectoryRedirectKeepsQuery) {
    const Response& r = get("/docs", Method::Get, [](Request& q) { q.query = "x=1&y=2"; });
    EXPECT_EQ(r.head.status, 301);
    EXPECT_EQ(header(r, "Location"), "/docs/?x=1&y=2");
    EXPECT_EQ(get("/sub%20dir").head.status, 301);
    EXPECT_EQ(header(response_, "Location"), "/sub%20dir/");
    EXPECT_EQ(get("/").head.status, 404) << "the root has no index";
}

TEST_F(StaticHandlerTest, DirectoryIndex) {
    const Response& r = get("/docs/");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(header(r, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r.body, "<p>docs</p>");
    EXPECT_EQ(get("/empty/").head.status, 404);
    EXPECT_EQ(get("/").head.status, 404);

    write("empty/index.htm", "htm");
    options_.index = {"missing.html", "index.htm"};
    handler_.reset();
    EXPECT_EQ(get("/empty/").head.status, 200);
    EXPECT_EQ(response_.body, "htm");
}

TEST_F(StaticHandlerTest, Autoindex) {
    options_.autoindex = true;
    const Response& r = get("/sub%20dir/");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(header(r, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(header(r, "Content-Length"), std::to_string(r.body.size()));
    std::string body(r.body);
    EXPECT_NE(body.find("<title>Index of /sub dir/</title>"), std::string::npos);
    EXPECT_NE(body.find("<a href=\"../\">../</a>"), std::string::npos);
    size_t nested = body.find("<a href=\"nested/\">nested/</a>");
    size_t escaped = body.find("<a href=\"%3Ca%26b%3E.txt\">&lt;a&amp;b&gt;.txt</a>");
    size_t plain = body.find("<a href=\"b.txt\">b.txt</a>");
    ASSERT_NE(nested, std::string::npos) << body;
    ASSERT_NE(escaped, std::string::npos) << body;
    ASSERT_NE(plain, std::string::npos) << body;
    EXPECT_LT(nested, escaped) << "directories first";
    EXPECT_LT(escaped, plain) << "then sorted by name ('<' < 'b')";
    EXPECT_EQ(body.find(".hidden"), std::string::npos);
    EXPECT_EQ(body.find("<a&b>"), std::string::npos) << "raw name never in the page";
    size_t line_end = body.find('\n', plain);
    EXPECT_EQ(body.substr(line_end - 2, 2), " 2") << "size column";

    const Response& head = get("/sub%20dir/", Method::Head);
    EXPECT_TRUE(head.body.empty());
    EXPECT_NE(header(head, "Content-Length"), "0");
}

TEST_F(StaticHandlerTest, AutoindexRootListsOnlyConfinedEntries) {
    options_.autoindex = true;
    options_.dotfiles_allow = true;
    std::string body(get("/").body);
    EXPECT_EQ(response_.head.status, 200);
    EXPECT_EQ(body.find("href=\"../\""), std::string::npos) << "no parent link at the root";
    EXPECT_NE(body.find(">link_in</a>"), std::string::npos);
    EXPECT_NE(body.find(">link_dir/</a>"), std::string::npos);
    EXPECT_EQ(body.find("link_out"), std::string::npos);
    EXPECT_EQ(body.find("link_up"), std::string::npos);
    EXPECT_EQ(body.find("link_etc"), std::string::npos);
    EXPECT_EQ(body.find(">fifo"), std::string::npos);
    EXPECT_NE(body.find(">.secret</a>"), std::string::npos) << "dotfiles allowed";
}

TEST_F(StaticHandlerTest, Dotfiles) {
    EXPECT_EQ(get("/.secret").head.status, 404);
    EXPECT_EQ(get("/.git/config").head.status, 404);
    EXPECT_EQ(get("/%2egit/config").head.status, 404);
    options_.dotfiles_allow = true;
    handler_.reset();
    EXPECT_EQ(get("/.secret").head.status, 200);
    EXPECT_EQ(response_.body, "secret");
    EXPECT_EQ(get("/.git/config").head.status, 200);
}

// Symlinks leading out of the root are refused with 403 (openat2 says EXDEV);
// links that stay inside are followed.
TEST_F(StaticHandlerTest, SymlinksCannotLeaveTheRoot) {
    EXPECT_EQ(get("/link_out").head.status, 403);
    EXPECT_EQ(get("/link_up").head.status, 403);
    EXPECT_EQ(get("/link_etc/passwd").head.status, 403);
    EXPECT_EQ(get("/link_etc").head.status, 403);
    const Response& r = get("/link_in");
    EXPECT_EQ(r.head.status, 200);
    EXPECT_EQ(r.body, kHello);
    EXPECT_EQ(get("/link_dir/index.html").head.status, 200);
}

TEST_F(StaticHandlerTest, NotRegularFileIsForbidden) {
    EXPECT_EQ(get("/fifo").head.status, 403) << "and the open did not block";
}

// Root reads anything regardless of mode bits, so under root the check runs in
// a child that first drops to nobody (65534).
TEST_F(StaticHandlerTest, UnreadableFileIsForbidden) {
    write("private.txt", "p");
    ASSERT_EQ(chmod((root_ + "/private.txt").c_str(), 0), 0);
    if (geteuid() != 0) {
        EXPECT_EQ(get("/private.txt").head.status, 403);
        return;
    }
    ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
        std::string error;
        auto handler = StaticHandler::create(options_, error);
        if (!handler) _exit(11);
        Request request;
        request.path = "/hello.txt";
        Response out;
        handler->handle(request, true, 0, out);
        if (out.head.status != 200) _exit(12); // the directory is readable to nobody
        request.path = "/private.txt";
        handler->handle(request, true, 0, out);
        _exit(out.head.status == 403 ? 0 : 13);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Any other errno is a 500 and one line on the error log: provoke EMFILE in a
// child whose descriptor limit leaves no room for the open.
TEST_F(StaticHandlerTest, UnexpectedErrnoIsInternalError) {
    std::string log_path = base_ + "/stderr.log";
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log < 0 || dup2(log, 2) < 0) _exit(10);
        close(log);
        std::string error;
        auto handler = StaticHandler::create(options_, error);
        if (!handler) _exit(11);
        int lowest_free = dup(0);
        close(lowest_free);
        struct rlimit limit;
        getrlimit(RLIMIT_NOFILE, &limit);
        limit.rlim_cur = rlim_t(lowest_free);
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(12);
        Request request;
        request.path = "/hello.txt";
        Response out;
        handler->handle(request, true, 0, out);
        _exit(out.head.status == 500 && out.body.find("500 Internal Server Error") != out.body.npos
                  ? 0
                  : 13);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    std::ifstream log(log_path);
    std::string line;
    std::getline(log, line);
    EXPECT_NE(line.find("/hello.txt"), std::string::npos) << line;
    EXPECT_NE(line.find(strerror(EMFILE)), std::string::npos) << line;
}

TEST_F(StaticHandlerTest, ConnectionHeader) {
    const Response& closing = get("/hello.txt", Method::Get, {}, false);
    EXPECT_FALSE(closing.keep_alive);
    EXPECT_EQ(header(closing, "Connection"), "close");
    const Response& old = get("/hello.txt", Method::Get, [](Request& q) { q.version_minor = 0; });
    EXPECT_TRUE(old.keep_alive);
    // The engine writes Connection, from the client's version (RFC 9112 §9.3).
    EXPECT_NE(head_text(old, kNow, 0).find("\r\nConnection: keep-alive\r\n"), std::string::npos);
    EXPECT_EQ(header(get("/hello.txt"), "Connection"), "<absent>");
    EXPECT_EQ(header(get("/missing", Method::Get, {}, false), "Connection"), "close");
}

TEST_F(StaticHandlerTest, GzipSibling) {
    auto with = [](std::string_view accept) {
        return [accept](Request& q) { q.accept_encoding = accept; };
    };
    const Response& gz = get("/style.css", Method::Get, with("deflate, gzip;q=0.5, br"));
    EXPECT_EQ(gz.head.status, 200);
    EXPECT_EQ(header(gz, "Content-Encoding"), "gzip");
    EXPECT_EQ(header(gz, "Vary"), "Accept-Encoding");
    EXPECT_EQ(header(gz, "Content-Type"), "text/css; charset=utf-8");
    EXPECT_EQ(payload(gz), "\x1f\x8b-not-really-gzip");
    EXPECT_EQ(header(gz, "Content-Length"), "18");

    // RFC 9110 §8.4.1.3: a recipient takes x-gzip for gzip.
    EXPECT_EQ(header(get("/style.css", Method::Get, with("x-gzip")), "Content-Encoding"), "gzip");
    for (const char* accept : {"", "deflate", "gzip;q=0", "gzip ; q=0.000"}) {
        const Response& plain = get("/style.css", Method::Get, with(accept));
        EXPECT_EQ(header(plain, "Content-Encoding"), "<absent>") << accept;
        EXPECT_EQ(header(plain, "Vary"), "Accept-Encoding") << accept;
        EXPECT_EQ(payload(plain), "body{}") << accept;
    }
    EXPECT_EQ(header(get("/hello.txt", Method::Get, with("gzip")), "Vary"), "<absent>");
    EXPECT_EQ(header(get("/style.css.gz"), "Content-Type"), "application/gzip");
}

struct ConditionalCase {
    const char* name;
    std::string if_match, if_unmodified_since, if_none_match, if_modified_since;
    int get_status;
};

TEST_F(StaticHandlerTest, ConditionalRequests) {
    const std::string etag = "\"6553f100-c\"";
    const std::string modified = http_date(kMtime);
    const std::string later = http_date(kMtime + 86400);
    const std::string earlier = http_date(kMtime - 86400);
    const ConditionalCase cases[] = {
        {"none", "", "", "", "", 200},
        {"INM match", "", "", etag, "", 304},
        {"INM weak match", "", "", "W/" + etag, "", 304},
        {"INM list", "", "", "\"x\", " + etag, "", 304},
        {"INM star", "", "", "*", "", 304},
        {"INM other", "", "", "\"x\"", "", 200},
        {"IMS equal", "", "", "", modified, 304},
        {"IMS later", "", "", "", later, 304},
        {"IMS earlier", "", "", "", earlier, 200},
        {"IMS garbage ignored", "", "", "", "yesterday", 200},
        {"INM other beats IMS", "", "", "\"x\"", modified, 200},
        {"IM match", etag, "", "", "", 200},
        {"IM star", "*", "", "", "", 200},
        {"IM other", "\"x\"", "", "", "", 412},
        {"IM weak is not strong", "W/" + etag, "", "", "", 412},
        {"IUS equal", "", modified, "", "", 200},
        {"IUS earlier", "", earlier, "", "", 412},
        {"IUS garbage ignored", "", "garbage", "", "", 200},
        {"IM match ignores IUS", etag, earlier, "", "", 200},
        {"IM fails before INM", "\"x\"", "", etag, "", 412},
        {"IM match then INM match", etag, "", etag, "", 304},
    };
    for (const ConditionalCase& c : cases) {
        for (Method method : {Method::Get, Method::Head}) {
            const Response& r = get("/hello.txt", method, [&](Request& q) {
                q.if_match = c.if_match;
                q.if_unmodified_since = c.if_unmodified_since;
                q.if_none_match = c.if_none_match;
                q.if_modified_since = c.if_modified_since;
            });
            EXPECT_EQ(r.head.status, c.get_status) << c.name;
            if (r.head.status == 304) {
                EXPECT_EQ(header(r, "ETag"), etag) << c.name;
                EXPECT_EQ(header(r, "Last-Modified"), modified) << c.name;
                EXPECT_EQ(header(r, "Date"), http_date(kNow));
                EXPECT_EQ(header(r, "Content-Length"), "<absent>") << c.name;
                EXPECT_EQ(header(r, "Content-Type"), "<absent>") << c.name;
                EXPECT_EQ(r.body_bytes(), 0u);
            }
            if (r.head.status == 412 && method == Method::Get) {
                EXPECT_NE(r.body.find("412 Precondition Failed"), std::string::npos);
            }
        }
    }
}

TEST_F(StaticHandlerTest, RangesOnSmallFile) {
    auto range = [](std::string_view value, std::string_view if_range = {}) {
        return [value, if_range](Request& q) {
            q.range = value;
            q.if_range = if_range;
        };
    };
    const Response& r = get("/hello.txt", Method::Get, range("bytes=0-4"));
    EXPECT_EQ(r.head.status, 206);
    EXPECT_EQ(head_text(r, kNow).rfind("HTTP/1.1 206 Partial Content\r\n", 0), 0u);
    EXPECT_EQ(header(r, "Content-Range"), "bytes 0-4/12");
    EXPECT_EQ(header(r, "Content-Length"), "5");
    EXPECT_EQ(r.body, "hello");

    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=-6")).body, "world\n");
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=6-")).body, "world\n");

    const Response& unsatisfiable = get("/hello.txt", Method::Get, range("bytes=50-"));
    EXPECT_EQ(unsatisfiable.head.status, 416);
    EXPECT_EQ(header(unsatisfiable, "Content-Range"), "bytes */12");

    for (const char* ignored : {"bytes=5-2", "bytes=x", "lines=1-2", "bytes=0-,0-"}) {
        const Response& whole = get("/hello.txt", Method::Get, range(ignored));
        EXPECT_EQ(whole.head.status, 200) << ignored;
        EXPECT_EQ(whole.body, kHello) << ignored;
    }
    EXPECT_EQ(get("/hello.txt", Method::Head, range("bytes=0-4")).head.status, 200)
        << "ranges only for GET";

    const std::string etag = "\"6553f100-c\"";
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=0-4", etag)).head.status, 206);
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=0-4", "\"old\"")).head.status, 200);
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=0-4", "W/" + etag)).head.status, 200);
    const std::string modified = http_date(kMtime);
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=0-4", modified)).head.status, 206);
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=0-4", http_date(kMtime - 1))).head.status,
              200);
    EXPECT_EQ(get("/hello.txt", Method::Get, range("bytes=50-", "\"old\"")).head.status, 200)
        << "If-Range mismatch: the Range is ignored altogether";
}

TEST_F(StaticHandlerTest, RangeOnBigFileUsesFileOffset) {
    const Response& r = get("/big.bin", Method::Get, [](Request& q) { q.range = "bytes=100-199"; });
    EXPECT_EQ(r.head.status, 206);
    EXPECT_EQ(header(r, "Content-Range"), "bytes 100-199/65536");
    EXPECT_TRUE(r.body.empty());
    EXPECT_EQ(r.file_offset, 100u);
    EXPECT_EQ(r.file_length, 100u);
    EXPECT_EQ(payload(r), big_.substr(100, 100));
}

// RFC 9110 §14.6: several ranges, one part each, from memory and from the file.
TEST_F(StaticHandlerTest, SeveralRangesAreMultipart) {
    for (const char* path : {"/hello.txt", "/big.bin"}) {
        const Response& r =
            get(path, Method::Get, [](Request& q) { q.range = "bytes=0-1, 6-8, 2-3"; });
        EXPECT_EQ(r.head.status, 206) << path;
        EXPECT_EQ(header(r, "Content-Range"), "<absent>");
        std::string type = header(r, "Content-Type");
        ASSERT_EQ(type.rfind("multipart/byteranges; boundary=", 0), 0u) << type;
        std::string boundary = type.substr(type.find('=') + 1);
        EXPECT_EQ(boundary.size(), 16u);
        EXPECT_EQ(header(r, "Content-Length"), std::to_string(r.body.size()));
        EXPECT_EQ(header(r, "ETag").empty(), false);
        std::string file = path == std::string("/hello.txt") ? std::string(kHello) : big_;
        std::string part_type = path == std::string("/hello.txt") ? "text/plain; charset=utf-8"
                                                                  : "application/octet-stream";
        std::string size = std::to_string(file.size());
        std::string expected;
        for (auto [first, last] : {std::pair{0, 1}, {6, 8}, {2, 3}}) {
            if (!expected.empty()) expected += "\r\n";
            expected += "--" + boundary + "\r\nContent-Type: " + part_type +
                        "\r\nContent-Range: bytes " + std::to_string(first) + "-" +
                        std::to_string(last) + "/" + size + "\r\n\r\n" +
                        file.substr(first, last - first + 1);
        }
        expected += "\r\n--" + boundary + "--\r\n";
        EXPECT_EQ(r.body, expected) << path;
    }
}

TEST_F(StaticHandlerTest, CacheHitsAndRevalidation) {
    options_.cache_revalidate_ms = 0;
    EXPECT_EQ(get("/hello.txt").body, kHello);
    EXPECT_EQ(handler().cache_misses(), 1u);
    EXPECT_EQ(handler().cache_hits(), 0u);
    EXPECT_EQ(get("/hello.txt").body, kHello);
    EXPECT_EQ(handler().cache_misses(), 1u);
    EXPECT_EQ(handler().cache_hits(), 1u);
    EXPECT_EQ(handler().cache_size(), 1u);

    Response kept = std::move(response_); // an in-flight response holding the old entry
    write("hello.txt", "changed!");
    const Response& r = get("/hello.txt");
    EXPECT_EQ(r.body, "changed!");
    EXPECT_NE(header(r, "ETag"), "\"6553f100-c\"");
    EXPECT_EQ(handler().cache_misses(), 2u);
    EXPECT_EQ(kept.body, kHello) << "the old entry lives while referenced";

    // Index resolution is cached under the directory path too.
    get("/docs/");
    get("/docs/");
    EXPECT_EQ(handler().cache_hits(), 2u);
    std::filesystem::remove(root_ + "/docs/index.html");
    EXPECT_EQ(get("/docs/").head.status, 404);
}

TEST_F(StaticHandlerTest, CacheTrustsEntriesWithinTheInterval) {
    options_.cache_revalidate_ms = 1000;
    EXPECT_EQ(get("/hello.txt").body, kHello);
    write("hello.txt", "changed!");
    now_ms_ += 999;
    EXPECT_EQ(get("/hello.txt").body, kHello);
    now_ms_ += 1;
    EXPECT_EQ(get("/hello.txt").body, "changed!");
}

TEST_F(StaticHandlerTest, CacheIsBounded) {
    options_.cache_entries = 2;
    get("/hello.txt");
    get("/style.css");
    get("/big.bin");
    EXPECT_EQ(handler().cache_size(), 2u);
    get("/hello.txt");
    EXPECT_EQ(handler().cache_misses(), 4u);
}

} // namespace
} // namespace lepus
