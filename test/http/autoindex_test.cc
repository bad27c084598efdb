// Unit tests of src/http/autoindex: UTF-8 column arithmetic, escaping, the
// format choice, and listings of a real directory in both formats.
#include "http/autoindex.h"

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

constexpr time_t kMtime = 1795428000; // Mon, 23 Nov 2026 10:00:00 GMT

// "é" repeated: two bytes, one character each.
std::string accented(size_t characters) {
    std::string text;
    for (size_t i = 0; i < characters; ++i)
        text += "\xC3\xA9";
    return text;
}

TEST(Autoindex, Utf8Length) {
    EXPECT_EQ(utf8_length(""), 0u);
    EXPECT_EQ(utf8_length("abc"), 3u);
    EXPECT_EQ(utf8_length("caf\xC3\xA9"), 4u);              // café
    EXPECT_EQ(utf8_length("\xE6\x97\xA5\xE6\x9C\xAC"), 2u); // 日本
    EXPECT_EQ(utf8_length("\xF0\x9F\x90\x87"), 1u);         // a rabbit, 4 bytes
    EXPECT_EQ(utf8_length("a\xFF"), 2u) << "a stray lead byte is a character";
}

TEST(Autoindex, Utf8PrefixNeverSplitsASequence) {
    EXPECT_EQ(utf8_prefix_bytes("abcdef", 3), 3u);
    EXPECT_EQ(utf8_prefix_bytes("ab", 5), 2u);
    EXPECT_EQ(utf8_prefix_bytes(accented(10), 3), 6u);
    EXPECT_EQ(utf8_prefix_bytes("\xF0\x9F\x90\x87x", 1), 4u);
    EXPECT_EQ(utf8_prefix_bytes("x\xE6\x97\xA5y", 2), 4u);
    EXPECT_EQ(utf8_prefix_bytes("abc", 0), 0u);
}

TEST(Autoindex, HtmlEscaping) {
    std::string out;
    append_html_escaped("<a href='x'>&\"", out);
    EXPECT_EQ(out, "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
    out.clear();
    append_html_escaped("line\nbreak\t\x7f caf\xC3\xA9", out);
    EXPECT_EQ(out, "line?break?? caf\xC3\xA9") << "controls shown as '?', UTF-8 kept";
}

TEST(Autoindex, JsonEscaping) {
    auto escaped = [](std::string_view text) {
        std::string out;
        append_json_escaped(text, out);
        return out;
    };
    EXPECT_EQ(escaped("plain.txt"), "plain.txt");
    EXPECT_EQ(escaped("a\"b\\c"), "a\\\"b\\\\c");
    EXPECT_EQ(escaped(std::string("t\tn\nz\x01", 6)), "t\\u0009n\\u000az\\u0001");
    EXPECT_EQ(escaped("caf\xC3\xA9"), "caf\xC3\xA9") << "valid UTF-8 passes as is";
    EXPECT_EQ(escaped("\xF0\x9F\x90\x87"), "\xF0\x9F\x90\x87");
    EXPECT_EQ(escaped("a\xFF"
                      "b"),
              "a\\ufffdb");
    EXPECT_EQ(escaped("\xC3"), "\\ufffd") << "truncated sequence";
    EXPECT_EQ(escaped("\xC0\xAF"), "\\ufffd\\ufffd") << "overlong '/'";
    EXPECT_EQ(escaped("\xED\xA0\x80"), "\\ufffd\\ufffd\\ufffd") << "surrogate";
    EXPECT_EQ(escaped("\xF4\x90\x80\x80"), "\\ufffd\\ufffd\\ufffd\\ufffd") << "above U+10FFFF";
}

TEST(Autoindex, FormatFromQuery) {
    EXPECT_EQ(autoindex_format_for(""), AutoindexFormat::Html);
    EXPECT_EQ(autoindex_format_for("format=json"), AutoindexFormat::Json);
    EXPECT_EQ(autoindex_format_for("sort=name&format=json"), AutoindexFormat::Json);
    EXPECT_EQ(autoindex_format_for("format=json&x=1"), AutoindexFormat::Json);
    EXPECT_EQ(autoindex_format_for("format=html"), AutoindexFormat::Html);
    EXPECT_EQ(autoindex_format_for("format=jsonp"), AutoindexFormat::Html);
    EXPECT_EQ(autoindex_format_for("xformat=json"), AutoindexFormat::Html);
    EXPECT_EQ(autoindex_content_type(AutoindexFormat::Json), "application/json");
    EXPECT_EQ(autoindex_content_type(AutoindexFormat::Html), "text/html; charset=utf-8");
}

class AutoindexListing : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/lepus-autoindex-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        root_ = pattern;
        make_directory("dir");
        make_file("a.txt", "12345");
        make_file("caf\xC3\xA9.txt", "xy");
        make_file(std::string(60, 'L') + ".txt", "");
        make_file(accented(70), "z");
        make_file("q\"uote\\.txt", "");
        make_file(".hidden", "h");
        root_fd_ = open(root_.c_str(), O_RDONLY | O_DIRECTORY);
        ASSERT_GE(root_fd_, 0);
    }
    void TearDown() override {
        close(root_fd_);
        std::filesystem::remove_all(root_);
    }

    void make_file(const std::string& name, const std::string& data) {
        std::ofstream(root_ + "/" + name) << data;
        set_mtime(name);
    }
    void make_directory(const std::string& name) {
        std::filesystem::create_directory(root_ + "/" + name);
        set_mtime(name);
    }
    void set_mtime(const std::string& name) {
        timespec times[2] = {{kMtime, 0}, {kMtime, 0}};
        ASSERT_EQ(utimensat(AT_FDCWD, (root_ + "/" + name).c_str(), times, 0), 0);
    }
    std::string render(AutoindexFormat format, std::string_view url = "/files/") {
        std::string out;
        EXPECT_EQ(render_autoindex(root_fd_, "", root_fd_, url, false, format, out), 0);
        return out;
    }

    std::string root_;
    int root_fd_ = -1;
};

// The visible text of a listing line: tags dropped, character references decoded
// as one character each, so columns can be measured in characters.
std::string visible_text(std::string_view line) {
    std::string text;
    bool in_tag = false;
    for (size_t i = 0; i < line.size(); ++i) {
        char c = line[i];
        if (c == '<') in_tag = true;
        if (!in_tag && c == '&') {
            i = line.find(';', i);
            text.push_back('?');
            continue;
        }
        if (!in_tag) text.push_back(c);
        if (c == '>') in_tag = false;
    }
    return text;
}

TEST_F(AutoindexListing, HtmlHasDoctypeAndViewport) {
    std::string html = render(AutoindexFormat::Html);
    EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html>", 0), 0u) << html;
    EXPECT_NE(html.find("<meta name=\"viewport\" content=\"width=device-width, "
                        "initial-scale=1\">"),
              std::string::npos);
    EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
    EXPECT_NE(html.find("<title>Index of /files/</title>"), std::string::npos);
    EXPECT_EQ(html.find(".hidden"), std::string::npos);
}

// Every line's date starts in the same character column, whatever the bytes of
// the name; a name longer than the column is cut to 47 characters and "..>".
TEST_F(AutoindexListing, HtmlColumnsAlignByCharacters) {
    std::string html = render(AutoindexFormat::Html);
    size_t start = html.find("<pre>") + 5;
    size_t end = html.find("</pre>");
    std::string_view pre(html.data() + start, end - start);
    std::vector<std::string> lines;
    while (!pre.empty()) {
        size_t newline = pre.find('\n');
        lines.emplace_back(pre.substr(0, newline));
        pre.remove_prefix(newline + 1);
    }
    ASSERT_EQ(lines.size(), 7u) << "../ and six entries:\n" << html;
    EXPECT_EQ(lines[0], "<a href=\"../\">../</a>");
    for (size_t i = 1; i < lines.size(); ++i) {
        std::string text = visible_text(lines[i]);
        size_t date = text.find("23-Nov-2026 10:00");
        ASSERT_NE(date, std::string::npos) << lines[i];
        EXPECT_EQ(utf8_length(std::string_view(text).substr(0, date)), kAutoindexNameWidth + 1)
            << lines[i];
        EXPECT_EQ(utf8_length(text), kAutoindexNameWidth + 1 + 17 + 21) << lines[i];
    }
    EXPECT_EQ(lines[1].rfind("<a href=\"dir/\">dir/</a> ", 0), 0u) << "directories first";
    EXPECT_NE(html.find(">" + std::string(47, 'L') + "..&gt;</a> 23-Nov-2026"), std::string::npos)
        << "a long ASCII name is cut as nginx does";
    EXPECT_NE(html.find("\">" + accented(47) + "..&gt;</a> 23-Nov-2026"), std::string::npos)
        << "a long UTF-8 name is cut at 47 characters, not bytes";
    EXPECT_NE(html.find("href=\"" + std::string(60, 'L') + ".txt\""), std::string::npos)
        << "the link keeps the whole name";
}

TEST_F(AutoindexListing, JsonAsNginx) {
    std::string json = render(AutoindexFormat::Json);
    std::string date = "\"mtime\":\"Mon, 23 Nov 2026 10:00:00 GMT\"";
    std::string expected = "[\n"
                           "{ \"name\":\"dir\", \"type\":\"directory\", " +
                           date +
                           " },\n"
                           "{ \"name\":\"" +
                           std::string(60, 'L') + ".txt\", \"type\":\"file\", " + date +
                           ", \"size\":0 },\n"
                           "{ \"name\":\"a.txt\", \"type\":\"file\", " +
                           date +
                           ", \"size\":5 },\n"
                           "{ \"name\":\"caf\xC3\xA9.txt\", \"type\":\"file\", " +
                           date +
                           ", \"size\":2 },\n"
                           "{ \"name\":\"q\\\"uote\\\\.txt\", \"type\":\"file\", " +
                           date +
                           ", \"size\":0 },\n"
                           "{ \"name\":\"" +
                           accented(70) + "\", \"type\":\"file\", " + date + ", \"size\":1 }\n]\n";
    EXPECT_EQ(json, expected);
}

TEST_F(AutoindexListing, JsonOfAnEmptyDirectory) {
    std::string empty = root_ + "/dir";
    int dir_fd = open(empty.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(dir_fd, 0);
    std::string out;
    EXPECT_EQ(
        render_autoindex(root_fd_, "dir/", dir_fd, "/dir/", false, AutoindexFormat::Json, out), 0);
    close(dir_fd);
    EXPECT_EQ(out, "[\n]\n");
}

} // namespace
} // namespace lepus
