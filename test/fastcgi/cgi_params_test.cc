// CGI meta-variables and script path splitting (src/fastcgi/cgi_params.cc).
#include "fastcgi/cgi_params.h"

#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace lepus::fastcgi {
namespace {

using Params = std::multimap<std::string, std::string>;

// Encodes the context as a PARAMS stream and decodes it back.
Params round_trip(const CgiContext& context) {
    std::string wire;
    ParamsWriter writer;
    writer.begin(wire, 1);
    append_cgi_params(writer, context);
    writer.finish();
    std::string content;
    RecordDecoder decoder;
    std::span<const char> rest(wire);
    while (!rest.empty()) {
        size_t consumed = 0;
        EXPECT_EQ(decoder.feed(rest, consumed), DecodeStatus::Done);
        rest = rest.subspan(consumed);
        content.append(decoder.record().content.begin(), decoder.record().content.end());
    }
    Params params;
    NameValueReader reader{std::span<const char>(content)};
    std::string_view name, value;
    while (reader.next(name, value))
        params.emplace(name, value);
    EXPECT_FALSE(reader.error());
    return params;
}

std::string get(const Params& params, const std::string& name) {
    EXPECT_EQ(params.count(name), 1u) << name;
    auto it = params.find(name);
    return it == params.end() ? "<absent>" : it->second;
}

SocketAddress address(const char* text) {
    return *parse_listen_address(text);
}

struct Fixture {
    std::vector<Header> headers = {{"Host", "example.com:8080"},
                                   {"User-Agent", "curl/8"},
                                   {"Accept", "text/html"},
                                   {"accept", "application/json"},
                                   {"Cookie", "a=1"},
                                   {"Cookie", "b=2"},
                                   {"X-Forwarded-For", "10.0.0.1"},
                                   {"Proxy", "http://evil:1"},
                                   {"X_Spoof", "yes"},
                                   {"Content-Type", "application/x-www-form-urlencoded"},
                                   {"Content-Length", "11"}};
    Request request;
    Fixture() {
        request.method = Method::Post;
        request.method_text = "POST";
        request.target = "/app/index.php/users/42?page=2&x=%20";
        request.path = "/app/index.php/users/42";
        request.query = "page=2&x=%20";
        request.host = "example.com:8080";
        request.headers = headers;
        request.content_length = 11;
        request.content_type = "application/x-www-form-urlencoded";
    }
    CgiContext context() const {
        return CgiContext{.request = request,
                          .document_root = "/srv/www",
                          .script_name = "/app/index.php",
                          .path_info = "/users/42",
                          .script_filename = "/srv/www/app/index.php",
                          .remote = address("192.0.2.7:51234"),
                          .local = address("127.0.0.1:8080"),
                          .server_name = "",
                          .content_length = 11};
    }
};

TEST(CgiParams, NginxFastcgiConfVariables) {
    Fixture f;
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "SCRIPT_FILENAME"), "/srv/www/app/index.php");
    EXPECT_EQ(get(p, "SCRIPT_NAME"), "/app/index.php");
    EXPECT_EQ(get(p, "PATH_INFO"), "/users/42");
    EXPECT_EQ(get(p, "PATH_TRANSLATED"), "/srv/www/users/42");
    EXPECT_EQ(get(p, "REQUEST_URI"), "/app/index.php/users/42?page=2&x=%20");
    EXPECT_EQ(get(p, "DOCUMENT_URI"), "/app/index.php/users/42");
    EXPECT_EQ(get(p, "DOCUMENT_ROOT"), "/srv/www");
    EXPECT_EQ(get(p, "QUERY_STRING"), "page=2&x=%20");
    EXPECT_EQ(get(p, "REQUEST_METHOD"), "POST");
    EXPECT_EQ(get(p, "CONTENT_TYPE"), "application/x-www-form-urlencoded");
    EXPECT_EQ(get(p, "CONTENT_LENGTH"), "11");
    EXPECT_EQ(get(p, "SERVER_PROTOCOL"), "HTTP/1.1");
    EXPECT_EQ(get(p, "SERVER_SOFTWARE"), std::string("lepus/") + LEPUS_TEST_VERSION);
    EXPECT_EQ(get(p, "GATEWAY_INTERFACE"), "CGI/1.1");
    EXPECT_EQ(get(p, "REMOTE_ADDR"), "192.0.2.7");
    EXPECT_EQ(get(p, "REMOTE_PORT"), "51234");
    EXPECT_EQ(get(p, "SERVER_ADDR"), "127.0.0.1");
    EXPECT_EQ(get(p, "SERVER_PORT"), "8080");
    EXPECT_EQ(get(p, "SERVER_NAME"), "example.com");
    EXPECT_EQ(get(p, "REQUEST_SCHEME"), "http");
    EXPECT_EQ(get(p, "REDIRECT_STATUS"), "200");
    EXPECT_EQ(p.count("HTTPS"), 0u);
}

// nginx's fastcgi_param: an override replaces the variable (sent once, so
// no FastCGI server has to pick between two), a new name is added.
TEST(CgiParams, ConfiguredParamsReplaceOrAdd) {
    Fixture f;
    std::vector<CgiParam> extra = {
        {"SERVER_SOFTWARE", "nginx"}, {"APP_ENV", "prod"}, {"PATH_TRANSLATED", "/x"}};
    CgiContext context = f.context();
    context.extra_params = extra;
    Params p = round_trip(context);
    EXPECT_EQ(get(p, "SERVER_SOFTWARE"), "nginx");
    EXPECT_EQ(get(p, "APP_ENV"), "prod");
    EXPECT_EQ(get(p, "PATH_TRANSLATED"), "/x");
    EXPECT_EQ(get(p, "SCRIPT_NAME"), "/app/index.php");
    EXPECT_EQ(get(p, "REQUEST_URI"), "/app/index.php/users/42?page=2&x=%20");
}

TEST(CgiParams, MergeKeepsOrderAndReplacesByName) {
    std::vector<CgiParam> params = {{"A", "1"}, {"B", "2"}};
    std::vector<CgiParam> site = {{"B", "3"}, {"C", "4"}};
    merge_cgi_params(params, site);
    EXPECT_EQ(params, (std::vector<CgiParam>{{"A", "1"}, {"B", "3"}, {"C", "4"}}));
    EXPECT_EQ(cgi_param_name_error("APP_ENV"), "");
    EXPECT_NE(cgi_param_name_error("APP-ENV"), "");
    EXPECT_NE(cgi_param_name_error(""), "");
}

TEST(CgiParams, HeadersBecomeHttpVariables) {
    Fixture f;
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "HTTP_HOST"), "example.com:8080");
    EXPECT_EQ(get(p, "HTTP_USER_AGENT"), "curl/8");
    EXPECT_EQ(get(p, "HTTP_X_FORWARDED_FOR"), "10.0.0.1");
    EXPECT_EQ(get(p, "HTTP_ACCEPT"), "text/html, application/json") << "joined, RFC 3875 §4.1.18";
    EXPECT_EQ(get(p, "HTTP_COOKIE"), "a=1; b=2");
    EXPECT_EQ(p.count("HTTP_PROXY"), 0u) << "httpoxy";
    EXPECT_EQ(p.count("HTTP_X_SPOOF"), 0u) << "underscore names are dropped";
    EXPECT_EQ(p.count("HTTP_CONTENT_TYPE"), 0u);
    EXPECT_EQ(p.count("HTTP_CONTENT_LENGTH"), 0u);
    for (const auto& [name, value] : p)
        EXPECT_EQ(p.count(name), 1u) << name;
}

// One request model: HTTP_HOST is request.host (an HTTP/2 :authority, an
// absolute-form target's host), never a second value from a Host field.
TEST(CgiParams, HttpHostIsTheRequestsHostAndHttp2IsNamed) {
    Fixture f;
    f.request.version_major = 2;
    f.request.host = "authority.example";
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "HTTP_HOST"), "authority.example");
    EXPECT_EQ(get(p, "SERVER_NAME"), "authority.example");
    EXPECT_EQ(get(p, "SERVER_PROTOCOL"), "HTTP/2.0");
    f.headers.erase(f.headers.begin()); // no Host field at all (HTTP/2 with :authority)
    f.request.headers = f.headers;
    p = round_trip(f.context());
    EXPECT_EQ(get(p, "HTTP_HOST"), "authority.example");
}

// Issue 31: lepus weakened the script's ETag by compressing; the script
// (WordPress) compares If-None-Match with its own strong one as a string.
TEST(CgiParams, IfNoneMatchReachesTheScriptStrong) {
    Fixture f;
    f.headers = {
        {"If-None-Match", "W/\"a\", \"b\""}, {"if-none-match", "W/\"c\""}, {"If-Match", "W/\"d\""}};
    f.request.headers = f.headers;
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "HTTP_IF_NONE_MATCH"), "\"a\", \"b\", \"c\"");
    EXPECT_EQ(get(p, "HTTP_IF_MATCH"), "W/\"d\"") << "If-Match compares strongly: untouched";
    f.headers = {{"If-None-Match", "\"a\""}};
    f.request.headers = f.headers;
    EXPECT_EQ(get(round_trip(f.context()), "HTTP_IF_NONE_MATCH"), "\"a\"");
}

TEST(CgiParams, NoPathInfoNoPathTranslated) {
    Fixture f;
    CgiContext context = f.context();
    context.path_info = "";
    context.server_name = "configured.example";
    context.content_length = std::nullopt;
    f.request.version_minor = 0;
    Params p = round_trip(context);
    EXPECT_EQ(p.count("PATH_INFO"), 0u);
    EXPECT_EQ(p.count("PATH_TRANSLATED"), 0u);
    EXPECT_EQ(get(p, "DOCUMENT_URI"), "/app/index.php");
    EXPECT_EQ(get(p, "SERVER_NAME"), "configured.example");
    EXPECT_EQ(get(p, "CONTENT_LENGTH"), "") << "as nginx sends it for a chunked body";
    EXPECT_EQ(get(p, "SERVER_PROTOCOL"), "HTTP/1.0");
}

TEST(CgiParams, HttpsAndIpv6) {
    Fixture f;
    CgiContext context = f.context();
    context.https = true;
    context.remote = address("[::1]:4000");
    f.request.host = "[::1]:8443";
    Params p = round_trip(context);
    EXPECT_EQ(get(p, "HTTPS"), "on");
    EXPECT_EQ(get(p, "REQUEST_SCHEME"), "https");
    EXPECT_EQ(get(p, "REMOTE_ADDR"), "::1");
    EXPECT_EQ(get(p, "REMOTE_PORT"), "4000");
    EXPECT_EQ(get(p, "SERVER_NAME"), "[::1]");
}

TEST(CgiParams, AbsoluteFormTargetGivesThePathAsRequestUri) {
    Fixture f;
    f.request.target = "http://example.com/app/index.php/users/42?page=2&x=%20";
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "REQUEST_URI"), "/app/index.php/users/42?page=2&x=%20");
}

TEST(CgiParams, HugeHeaderStillEncodes) {
    Fixture f;
    std::string big(70000, 'z');
    f.headers.push_back({"X-Big", big});
    f.request.headers = f.headers;
    Params p = round_trip(f.context());
    EXPECT_EQ(get(p, "HTTP_X_BIG"), big);
}

const std::string_view kPhp[] = {".php"};

std::pair<std::string, std::string> split(std::string_view path) {
    auto result = split_script_path(path, kPhp);
    if (!result) return {"<none>", ""};
    return {std::string(result->script_name), std::string(result->path_info)};
}

TEST(CgiParams, SplitScriptPath) {
    using P = std::pair<std::string, std::string>;
    EXPECT_EQ(split("/index.php"), (P{"/index.php", ""}));
    EXPECT_EQ(split("/index.php/some/path"), (P{"/index.php", "/some/path"}));
    EXPECT_EQ(split("/index.php/"), (P{"/index.php", "/"}));
    EXPECT_EQ(split("/a/b.php/c.php/d"), (P{"/a/b.php", "/c.php/d"})) << "the first segment";
    // Never executes evil.jpg: the script is the whole path, which does not exist.
    EXPECT_EQ(split("/uploads/evil.jpg/x.php"), (P{"/uploads/evil.jpg/x.php", ""}));
    EXPECT_EQ(split("/dir.php.bak/x"), (P{"<none>", ""})) << "only a segment's end counts";
    EXPECT_EQ(split("/notphp"), (P{"<none>", ""}));
    EXPECT_EQ(split("/"), (P{"<none>", ""}));
    EXPECT_EQ(split(""), (P{"<none>", ""}));
    EXPECT_EQ(split("/.php"), (P{"<none>", ""}));
    EXPECT_EQ(split("/x.PHP"), (P{"<none>", ""})) << "case-sensitive, like nginx's regex";
    const std::string_view several[] = {".php", ".phtml"};
    auto result = split_script_path("/t.phtml/i", several);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->script_name, "/t.phtml");
    EXPECT_EQ(result->path_info, "/i");
}

} // namespace
} // namespace lepus::fastcgi
