#include "server/site_table.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

SiteConfig make_site(std::vector<std::string> names, bool is_default = false) {
    SiteConfig site;
    site.server_names = std::move(names);
    site.is_default = is_default;
    site.root = "/srv";
    return site;
}

TEST(SiteTable, ExactThenLongestWildcardThenDefault) {
    SiteTable table({make_site({"example.com", "www.example.com"}), make_site({"*.example.com"}),
                     make_site({"*.api.example.com"}), make_site({"other.org"}, true)});
    EXPECT_EQ(table.match("example.com"), 0u);
    EXPECT_EQ(table.match("WWW.Example.com:8080"), 0u);
    EXPECT_EQ(table.match("shop.example.com"), 1u);
    EXPECT_EQ(table.match("a.b.example.com"), 1u);
    EXPECT_EQ(table.match("v1.api.example.com"), 2u);
    EXPECT_EQ(table.match("example.com."), 0u);
    EXPECT_EQ(table.match("unknown.net"), 3u);
    EXPECT_EQ(table.match(""), 3u);
    EXPECT_EQ(table.match("xexample.com"), 3u); // not a subdomain
}

TEST(SiteTable, DefaultIsTheFlaggedSite) {
    SiteTable table({make_site({"a"}), make_site({"b"}, true)});
    EXPECT_EQ(table.match("c"), 1u);
    EXPECT_EQ(table.match("[::1]:80"), 1u);
}

TEST(SiteRules, RedirectsMatchExactPaths) {
    SiteConfig site = make_site({"a"});
    site.redirects = {{"/old", "https://example.com/new", 308}};
    ASSERT_NE(find_redirect(site, "/old"), nullptr);
    EXPECT_EQ(find_redirect(site, "/old")->status, 308);
    EXPECT_EQ(find_redirect(site, "/old/"), nullptr);
    EXPECT_EQ(find_redirect(site, "/older"), nullptr);
}

TEST(SiteRules, PrefixAndPatternRedirectsInTheirOrder) {
    SiteConfig site = make_site({"a"});
    std::string error;
    auto blog = PathPattern::compile("^/blog/(\\d+)/(.*)$", error);
    ASSERT_TRUE(blog) << error;
    EXPECT_EQ(blog->capture_count(), 2u);
    Redirect prefix{"/old/", "/new/", 301, true};
    Redirect pattern{"", "/posts/$1/$2?from=blog", 308};
    pattern.compiled = std::make_shared<const PathPattern>(*blog);
    site.redirects = {prefix, pattern};
    PatternMatch match;
    std::string out;
    const Redirect* found = find_redirect(site, "/old/a b", match);
    ASSERT_EQ(found, &site.redirects[0]);
    append_redirect_target(*found, "/old/a b", "q=1", match, out);
    EXPECT_EQ(out, "/new/a%20b?q=1");
    found = find_redirect(site, "/blog/12/x\r\ny", match);
    EXPECT_EQ(found, nullptr); // '.' stops at a newline
    found = find_redirect(site, "/blog/12/x y", match);
    ASSERT_EQ(found, &site.redirects[1]);
    out.clear();
    append_redirect_target(*found, "/blog/12/x y", "page=2", match, out);
    EXPECT_EQ(out, "/posts/12/x%20y?from=blog&page=2");
    EXPECT_FALSE(PathPattern::compile("(", error));
    EXPECT_NE(error.find("offset"), std::string::npos);
    EXPECT_EQ(substitution_error("/a/$1", 1), "");
    EXPECT_NE(substitution_error("/a/$2", 1), "");
}

TEST(SiteRules, HeadersByExtensionPrefixOrAll) {
    SiteConfig site = make_site({"a"});
    site.headers = {{"*.css", "Cache-Control", "max-age=3600"},
                    {"/static/", "X-Static", "1"},
                    {"*", "X-Site", "a"}};
    auto lines = [&](std::string_view path) {
        ResponseHead head;
        add_rule_headers(site, path, head);
        std::string out;
        head.append_http1_fields(out);
        return out;
    };
    EXPECT_EQ(lines("/static/app.css"),
              "Cache-Control: max-age=3600\r\nX-Static: 1\r\nX-Site: a\r\n");
    EXPECT_EQ(lines("/index.html"), "X-Site: a\r\n");
    EXPECT_EQ(lines("/.css"), "X-Site: a\r\n"); // a dotfile, not the extension
}

// A location's rules add to the site's; a name both set (in any case) is the location's alone.
TEST(SiteTable, LocationHeaderRulesAddToTheSitesAndReplaceTheSameName) {
    SiteConfig site;
    site.headers = {{"*", "X-Frame-Options", "DENY"}, {"*", "X-Site", "a"}};
    SiteConfig location;
    location.headers = {{"*", "x-frame-options", "SAMEORIGIN"},
                        {"*.css", "Cache-Control", "max-age=60"}};
    auto lines = [&](std::string_view path, const SiteConfig* own) {
        ResponseHead head;
        add_rule_headers(site, path, head, own);
        std::string out;
        head.append_http1_fields(out);
        return out;
    };
    EXPECT_EQ(lines("/assets/a.css", &location),
              "X-Site: a\r\nx-frame-options: SAMEORIGIN\r\nCache-Control: max-age=60\r\n");
    EXPECT_EQ(lines("/assets/a.js", &location), "X-Site: a\r\nx-frame-options: SAMEORIGIN\r\n");
    EXPECT_EQ(lines("/assets/a.css", nullptr), "X-Frame-Options: DENY\r\nX-Site: a\r\n");
}

} // namespace
} // namespace lepus
