#include "http/mime_types.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace lepus {
namespace {

TEST(MimeTypes, BuiltinTable) {
    MimeTypes types;
    EXPECT_EQ(types.lookup("index.html"), "text/html; charset=utf-8");
    EXPECT_EQ(types.lookup("/a/b/style.css"), "text/css; charset=utf-8");
    EXPECT_EQ(types.lookup("app.js"), "text/javascript; charset=utf-8");
    EXPECT_EQ(types.lookup("data.json"), "application/json; charset=utf-8");
    EXPECT_EQ(types.lookup("IMAGE.PNG"), "image/png");
    EXPECT_EQ(types.lookup("photo.jpg"), "image/jpeg");
    EXPECT_EQ(types.lookup("a.gif"), "image/gif");
    EXPECT_EQ(types.lookup("a.svg"), "image/svg+xml");
    EXPECT_EQ(types.lookup("a.webp"), "image/webp");
    EXPECT_EQ(types.lookup("favicon.ico"), "image/x-icon");
    EXPECT_EQ(types.lookup("notes.txt"), "text/plain; charset=utf-8");
    EXPECT_EQ(types.lookup("feed.xml"), "text/xml; charset=utf-8");
    EXPECT_EQ(types.lookup("doc.pdf"), "application/pdf");
    EXPECT_EQ(types.lookup("mod.wasm"), "application/wasm");
    EXPECT_EQ(types.lookup("font.woff2"), "font/woff2");
    EXPECT_EQ(types.lookup("movie.mp4"), "video/mp4");
    EXPECT_EQ(types.lookup("archive.tar.gz"), "application/gzip");
}

// The types the web depends on, as browsers and the RFCs expect them.
TEST(MimeTypes, WebTypes) {
    struct Case {
        const char* file;
        const char* type;
    };
    const Case cases[] = {
        {"a.html", "text/html; charset=utf-8"},
        {"a.css", "text/css; charset=utf-8"},
        {"a.js", "text/javascript; charset=utf-8"}, // RFC 9239
        {"a.mjs", "text/javascript; charset=utf-8"},
        {"a.json", "application/json; charset=utf-8"},
        {"a.wasm", "application/wasm"},
        {"a.svg", "image/svg+xml"},
        {"a.png", "image/png"},
        {"a.jpg", "image/jpeg"},
        {"a.jpeg", "image/jpeg"},
        {"a.gif", "image/gif"},
        {"a.webp", "image/webp"},
        {"a.avif", "image/avif"},
        {"a.ico", "image/x-icon"},
        {"a.woff", "font/woff"},
        {"a.woff2", "font/woff2"},
        {"a.ttf", "font/ttf"},
        {"a.otf", "font/otf"},
        {"a.txt", "text/plain; charset=utf-8"},
        {"a.xml", "text/xml; charset=utf-8"},
        {"a.pdf", "application/pdf"},
        {"a.mp4", "video/mp4"},
        {"a.webm", "video/webm"},
        {"a.mp3", "audio/mpeg"},
        {"a.ogg", "audio/ogg"},
        {"a.wav", "audio/wav"},
        {"a.zip", "application/zip"},
        {"a.gz", "application/gzip"},
        {"app.js.map", "application/json; charset=utf-8"},
        {"site.webmanifest", "application/manifest+json"},
        {"segment.ts", "video/mp2t"},
        {"a.yaml", "application/yaml"},
        {"a.yml", "application/yaml"},
        {"Cargo.toml", "application/toml"},
    };
    MimeTypes types;
    for (const Case& c : cases)
        EXPECT_EQ(types.lookup(c.file), c.type) << c.file;
}

// The host's file may say otherwise for the web types (Debian's maps .ts to Qt
// Linguist and, in older releases, .js to application/javascript): ours win.
TEST(MimeTypes, SystemTableKeepsWebTypes) {
    const MimeTypes& system = MimeTypes::system();
    EXPECT_EQ(system.lookup("a.js"), "text/javascript; charset=utf-8");
    EXPECT_EQ(system.lookup("a.ts"), "video/mp2t");
    EXPECT_EQ(system.lookup("a.yaml"), "application/yaml");
    EXPECT_EQ(system.lookup("a.toml"), "application/toml");
}

TEST(MimeTypes, UnknownIsOctetStream) {
    MimeTypes types;
    EXPECT_EQ(types.lookup("README"), "application/octet-stream");
    EXPECT_EQ(types.lookup("dir.html/file"), "application/octet-stream");
    EXPECT_EQ(types.lookup("trailing."), "application/octet-stream");
    EXPECT_EQ(types.lookup("x.unknownextension"), "application/octet-stream");
    EXPECT_EQ(types.lookup(std::string(100, 'a') + "." + std::string(40, 'b')),
              "application/octet-stream");
}

TEST(MimeTypes, FileExtendsButBuiltinWins) {
    char path[] = "/tmp/lepus-mime-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    {
        std::ofstream file(path);
        file << "# a comment line\n"
                "application/x-foo\tfoo  bar\n"
                "text/x-baz baz # trailing comment qux\n"
                "application/javascript js\n"
                "text/vnd.trolltech.linguist ts\n"
                "application/x-empty\n";
    }
    MimeTypes types;
    size_t before = types.size();
    ASSERT_TRUE(types.add_file(path));
    unlink(path);
    EXPECT_EQ(types.lookup("a.foo"), "application/x-foo");
    EXPECT_EQ(types.lookup("a.BAR"), "application/x-foo");
    EXPECT_EQ(types.lookup("a.baz"), "text/x-baz; charset=utf-8");
    EXPECT_EQ(types.lookup("a.qux"), "application/octet-stream");
    EXPECT_EQ(types.lookup("a.js"), "text/javascript; charset=utf-8");
    EXPECT_EQ(types.lookup("segment.ts"), "video/mp2t");
    EXPECT_EQ(types.size(), before + 3);
}

TEST(MimeTypes, MissingFile) {
    MimeTypes types;
    EXPECT_FALSE(types.add_file("/nonexistent/mime.types"));
}

TEST(MimeTypes, SystemTableReadsEtcMimeTypes) {
    const MimeTypes& system = MimeTypes::system();
    EXPECT_EQ(&system, &MimeTypes::system());
    EXPECT_EQ(system.lookup("index.html"), "text/html; charset=utf-8");
    if (access("/etc/mime.types", R_OK) != 0) GTEST_SKIP() << "no /etc/mime.types here";
    EXPECT_GT(system.size(), MimeTypes().size());
}

} // namespace
} // namespace lepus
