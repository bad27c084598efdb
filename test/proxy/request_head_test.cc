#include "proxy/backend_url.h"
#include "proxy/proxy_exchange.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string>

namespace lepus::proxy {
namespace {

SocketAddress v4(const char* text) {
    SocketAddress address;
    address.storage.v4.sin_family = AF_INET;
    inet_pton(AF_INET, text, &address.storage.v4.sin_addr);
    address.length = sizeof address.storage.v4;
    return address;
}

SocketAddress v6(const char* text) {
    SocketAddress address;
    address.storage.v6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, text, &address.storage.v6.sin6_addr);
    address.length = sizeof address.storage.v6;
    return address;
}

TEST(RequestHead, DropsHopByHopAndAddsForwardedFields) {
    Header headers[] = {{"Host", "example.com"},
                        {"Connection", "keep-alive, X-Private"},
                        {"X-Private", "secret"},
                        {"Keep-Alive", "timeout=5"},
                        {"TE", "trailers"},
                        {"Upgrade", "h2c"},
                        {"Expect", "100-continue"},
                        {"X-Forwarded-For", "198.51.100.1"},
                        {"X-Forwarded-Proto", "https"},
                        {"Accept", "*/*"}};
    Request request;
    request.method_text = "POST";
    request.target = "/a%20b?q=1";
    request.path = "/a%20b";
    request.query = "q=1";
    request.host = "example.com";
    request.headers = headers;
    request.content_length = 3;
    // The client is the exchange's (after --real-ip-from), not the socket's.
    ConnectionInfo connection(v4("203.0.113.7"), -1);
    std::string out;
    append_request_head(request, connection, v4("192.0.2.9"), "backend.local", out);
    EXPECT_EQ(out, "POST /a%20b?q=1 HTTP/1.1\r\n"
                   "Host: backend.local\r\n"
                   "Accept: */*\r\n"
                   "X-Forwarded-For: 198.51.100.1, 192.0.2.9\r\n"
                   "X-Forwarded-Proto: http\r\n"
                   "X-Forwarded-Host: example.com\r\n"
                   "Forwarded: for=192.0.2.9;proto=http;host=example.com\r\n"
                   "Content-Length: 3\r\n"
                   "\r\n");
}

// Issue 31: the backend sees If-None-Match with the weak tags lepus made strong again.
TEST(RequestHead, IfNoneMatchGoesStrong) {
    Header headers[] = {{"If-None-Match", "W/\"a\", \"b\""}, {"If-Match", "W/\"c\""}};
    Request request;
    request.method_text = "GET";
    request.target = "/";
    request.headers = headers;
    ConnectionInfo connection(v4("192.0.2.9"), -1);
    std::string out;
    append_request_head(request, connection, connection.peer, "h", out);
    EXPECT_NE(out.find("\r\nIf-None-Match: \"a\", \"b\"\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nIf-Match: W/\"c\"\r\n"), std::string::npos) << out;
}

TEST(RequestHead, AbsoluteFormChunkedAndIpv6) {
    Request request;
    request.method_text = "PUT";
    request.target = "http://example.com:8080/x?y";
    request.path = "/x";
    request.query = "y";
    request.host = "example.com:8080";
    request.chunked = true;
    ConnectionInfo connection(v6("2001:db8::1"), -1);
    connection.secure = true;
    std::string out;
    append_request_head(request, connection, connection.peer, request.host, out);
    EXPECT_EQ(out, "PUT /x?y HTTP/1.1\r\n"
                   "Host: example.com:8080\r\n"
                   "X-Forwarded-For: 2001:db8::1\r\n"
                   "X-Forwarded-Proto: https\r\n"
                   "X-Forwarded-Host: example.com:8080\r\n"
                   "Forwarded: for=\"[2001:db8::1]\";proto=https;host=\"example.com:8080\"\r\n"
                   "Transfer-Encoding: chunked\r\n"
                   "\r\n");
}

TEST(RequestHead, UpgradePassedOnOnlyWhenAsked) {
    Header websocket[] = {{"Upgrade", "websocket"}, {"Connection", "Upgrade"}};
    Header unnamed[] = {{"Upgrade", "websocket"}};
    Header h2c[] = {{"Upgrade", "h2c"}, {"Connection", "Upgrade, HTTP2-Settings"}};
    Request request;
    request.method_text = "GET";
    request.target = "/ws";
    request.headers = websocket;
    EXPECT_EQ(requested_upgrade(request), "websocket");
    ConnectionInfo connection(v4("192.0.2.9"), -1);
    std::string out;
    append_request_head(request, connection, connection.peer, "h", out);
    EXPECT_NE(out.find("\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"), std::string::npos)
        << out;
    request.version_minor = 0;
    EXPECT_EQ(requested_upgrade(request), "");
    request.version_minor = 1;
    request.headers = unnamed;
    EXPECT_EQ(requested_upgrade(request), "");
    request.headers = h2c;
    EXPECT_EQ(requested_upgrade(request), "");
    out.clear();
    append_request_head(request, connection, connection.peer, "h", out);
    EXPECT_EQ(out.find("Upgrade"), std::string::npos) << out;
}

// Issue 32: a backend that reads '_' as '-' must not get a client's copy of
// the fields lepus sets (CVE-2024-45614) or of the framing.
TEST(RequestHead, NamesWithUnderscoresAreDropped) {
    Header headers[] = {{"X_Forwarded_Proto", "https"},  {"X_Forwarded_Host", "evil.test"},
                        {"Content_Length", "0"},         {"Transfer_Encoding", "chunked"},
                        {"x_forwarded_for", "10.0.0.1"}, {"X-Kept", "yes"}};
    Request request;
    request.method_text = "GET";
    request.target = "/";
    request.path = "/";
    request.host = "example.com";
    request.headers = headers;
    ConnectionInfo connection(v4("192.0.2.9"), -1);
    std::string out;
    append_request_head(request, connection, connection.peer, "h", out);
    EXPECT_EQ(out.find('_'), std::string::npos) << out;
    EXPECT_EQ(out.find("evil.test"), std::string::npos) << out;
    EXPECT_EQ(out.find("10.0.0.1"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nX-Kept: yes\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nX-Forwarded-Proto: http\r\n"), std::string::npos) << out;
}

TEST(BackendUrl, Forms) {
    EXPECT_TRUE(parse_backend_url("http://127.0.0.1:3000"));
    EXPECT_TRUE(parse_backend_url("http://127.0.0.1:3000/"));
    EXPECT_TRUE(parse_backend_url("http://[::1]:3000"));
    EXPECT_TRUE(parse_backend_url("127.0.0.1:3000"));
    EXPECT_TRUE(parse_backend_url("unix:/run/app.sock"));
    EXPECT_EQ(parse_backend_url("http://localhost:3000")->text, "http://localhost:3000");
    EXPECT_FALSE(parse_backend_url("https://127.0.0.1:3000"));
    EXPECT_FALSE(parse_backend_url("http://127.0.0.1:3000/app/"));
    EXPECT_FALSE(parse_backend_url("http://example.com:80"));
    EXPECT_FALSE(parse_backend_url("http://127.0.0.1"));
    EXPECT_FALSE(parse_backend_url("http://unix:/x"));
}

} // namespace
} // namespace lepus::proxy
