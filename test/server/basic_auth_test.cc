// Basic auth's pure parts: the Authorization field parser (also split at every
// byte of the token, as a client may send anything), the rule for a path, the
// `auth` key of a [[site]], and load_site_auth naming the rule of a bad file.
#include "server/basic_auth.h"
#include "server/htpasswd.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace lepus {
namespace {

TEST(BasicCredentials, DecodesUserAndPassword) {
    std::string buffer;
    auto credentials = parse_basic_credentials("Basic Ym9iOnNlY3JldA==", buffer); // bob:secret
    ASSERT_TRUE(credentials);
    EXPECT_EQ(credentials->user, "bob");
    EXPECT_EQ(credentials->password, "secret");
    // The password may hold ':' (only the user-id may not: RFC 7617 §2); padding may be left out.
    credentials = parse_basic_credentials("basic   Ym9iOnM6ZWM6cmV0", buffer); // bob:s:ec:ret
    ASSERT_TRUE(credentials);
    EXPECT_EQ(credentials->password, "s:ec:ret");
    credentials = parse_basic_credentials("BASIC Ym9iOg", buffer); // "bob:", no padding
    ASSERT_TRUE(credentials);
    EXPECT_EQ(credentials->user, "bob");
    EXPECT_EQ(credentials->password, "");
}

TEST(BasicCredentials, RefusesOtherSchemesAndMalformedTokens) {
    std::string buffer;
    for (std::string_view value :
         {"", "Basic", "Basic ", "Basicx Ym9iOnNlY3JldA==", "Bearer Ym9iOnNlY3JldA==",
          "Basic Ym9iOnNlY3JldA=!", "Basic Ym9i",                  // "bob": no ':'
          "Basic Y", "Basic Ym9iOnNl\tY3JldA==", "Basic Ym9iOgo=", // "bob:\n": a control
          "Basic ????"})
        EXPECT_FALSE(parse_basic_credentials(value, buffer)) << value;
}

TEST(BasicCredentials, EveryTruncationIsRefusedOrDecodesAPrefix) {
    // No truncated token may crash, read out of bounds, or decode to something
    // that is not a prefix of "alice:wonderland".
    std::string full = "Basic YWxpY2U6d29uZGVybGFuZA==", buffer;
    for (size_t i = 0; i <= full.size(); ++i) {
        auto credentials = parse_basic_credentials(std::string_view(full).substr(0, i), buffer);
        if (!credentials) continue;
        EXPECT_EQ(credentials->user, "alice");
        EXPECT_TRUE(std::string_view("wonderland").starts_with(credentials->password));
    }
}

TEST(AuthRules, LongestPrefixWinsAndOffOpens) {
    SiteConfig site;
    AuthRule admin;
    admin.paths = {"/admin/", "/private"};
    admin.htpasswd = "/x";
    AuthRule open;
    open.paths = {"/admin/public/"};
    open.off = true;
    AuthRule deeper;
    deeper.paths = {"/admin/public/secret/"};
    deeper.htpasswd = "/y";
    site.auth = {admin, open, deeper};
    EXPECT_EQ(find_auth_rule(site, "/admin/"), &site.auth[0]);
    EXPECT_EQ(find_auth_rule(site, "/admin/x/y"), &site.auth[0]);
    EXPECT_EQ(find_auth_rule(site, "/private.html"),
              &site.auth[0]); // a prefix, as nginx's location
    EXPECT_EQ(find_auth_rule(site, "/admin/public/logo.png"), nullptr);
    EXPECT_EQ(find_auth_rule(site, "/admin/public/secret/a"), &site.auth[2]);
    EXPECT_EQ(find_auth_rule(site, "/admin"), nullptr); // the files answer 301 to /admin/
    EXPECT_EQ(find_auth_rule(site, "/"), nullptr);
}

TEST(AuthRules, CaseInsensitiveRulesMatchAnyCase) {
    SiteConfig site;
    AuthRule api;
    api.paths = {"/api/private/"};
    api.htpasswd = "/x";
    site.auth = {api};
    // By default a prefix is matched as written (nginx's `location`).
    EXPECT_EQ(find_auth_rule(site, "/api/private/x"), &site.auth[0]);
    EXPECT_EQ(find_auth_rule(site, "/api/Private/x"), nullptr);
    EXPECT_EQ(find_auth_rule(site, "/API/PRIVATE/x"), nullptr);
    site.auth[0].case_insensitive = true;
    EXPECT_EQ(find_auth_rule(site, "/api/Private/x"), &site.auth[0]);
    EXPECT_EQ(find_auth_rule(site, "/API/PRIVATE/x"), &site.auth[0]);
    EXPECT_EQ(find_auth_rule(site, "/api/privat"), nullptr); // still a prefix
    EXPECT_EQ(find_auth_rule(site, "/api/public/x"), nullptr);
    // An `off` rule may be case-insensitive too; the longest prefix still wins.
    AuthRule open;
    open.paths = {"/api/private/open/"};
    open.off = true;
    open.case_insensitive = true;
    site.auth.push_back(open);
    EXPECT_EQ(find_auth_rule(site, "/Api/Private/OPEN/a"), nullptr);
    EXPECT_EQ(find_auth_rule(site, "/Api/Private/closed"), &site.auth[0]);
}

class AuthConfigTest : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/lepus-auth-XXXXXX";
        dir_ = mkdtemp(pattern);
    }
    void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
    std::string write(const std::string& name, const std::string& text) {
        std::string path = dir_ + "/" + name;
        std::ofstream(path) << text;
        return path;
    }
    std::string dir_;
};

TEST_F(AuthConfigTest, TheAuthKeyOfASite) {
    std::string passwords =
        write("pw", "bob:$2y$05$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC\n");
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write("lepus.toml", R"([[site]]
root = "/srv"
auth = [{ paths = ["/admin/"], realm = "Staff only", htpasswd = ")" +
                                                         passwords + R"(" },
        { paths = "/admin/public/", off = true, case_insensitive = true }]
)"),
                                 config, errors))
        << errors.front();
    ASSERT_EQ(config.sites.size(), 1u);
    const std::vector<AuthRule>& rules = config.sites[0].auth;
    ASSERT_EQ(rules.size(), 2u);
    EXPECT_EQ(rules[0].realm, "Staff only");
    EXPECT_EQ(rules[0].paths, std::vector<std::string>{"/admin/"});
    EXPECT_TRUE(rules[1].off);
    EXPECT_FALSE(rules[0].case_insensitive);
    EXPECT_TRUE(rules[1].case_insensitive);
    std::string error;
    ASSERT_TRUE(load_site_auth(config.sites, error)) << error;
    ASSERT_TRUE(rules[0].users);
    EXPECT_TRUE(rules[0].users->find("bob"));
    EXPECT_FALSE(rules[1].users);
}

TEST_F(AuthConfigTest, BadRulesAreErrorsWithPositions) {
    ConfigFile config;
    std::vector<std::string> errors;
    EXPECT_FALSE(load_config_file(write("lepus.toml", R"([[site]]
root = "/srv"
auth = [{ paths = ["admin/"], htpasswd = "/pw" },
        { paths = ["/a/"] },
        { paths = ["/b/"], htpasswd = "/pw", off = true },
        { paths = ["/c/"], htpasswd = "/pw", realm = "say \"hi\"" },
        { paths = ["/d/"], htpasswd = "/pw", user = "x" }]
)"),
                                  config, errors));
    ASSERT_EQ(errors.size(), 5u);
    EXPECT_NE(errors[0].find("lepus.toml:3:9: an auth rule needs paths"), std::string::npos)
        << errors[0];
    EXPECT_NE(errors[1].find("either htpasswd"), std::string::npos) << errors[1];
    EXPECT_NE(errors[2].find("either htpasswd"), std::string::npos) << errors[2];
    EXPECT_NE(errors[3].find("'realm'"), std::string::npos) << errors[3];
    EXPECT_NE(errors[4].find("unknown key 'user' in auth"), std::string::npos) << errors[4];
}

TEST_F(AuthConfigTest, ABadFileIsOneLineNamingTheRule) {
    std::string weak = write("weak", "bob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n");
    std::vector<SiteConfig> sites(1);
    AuthRule rule;
    rule.paths = {"/"};
    rule.htpasswd = weak;
    rule.origin = "lepus.toml:4:9";
    sites[0].auth.push_back(rule);
    std::string error;
    EXPECT_FALSE(load_site_auth(sites, error));
    EXPECT_TRUE(error.starts_with("lepus.toml:4:9: auth: " + weak + ":1: user 'bob': {SHA}"))
        << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
}

} // namespace
} // namespace lepus
