#include "server/config_file.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace lepus {
namespace {

class ConfigFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/lepus-config-XXXXXX";
        dir_ = mkdtemp(pattern);
    }
    void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

    std::string write(const std::string& text) {
        std::string path = dir_ + "/lepus.toml";
        std::ofstream(path) << text;
        return path;
    }

    // The outputs of expand_config_argument for one command line.
    struct Expansion {
        bool ok = false, check = false;
        std::string config_path;
        std::vector<std::string> arguments, errors;
        std::vector<SiteConfig> sites;
        std::map<std::string, std::string> origins;
    };
    static Expansion expand(std::vector<std::string> args) {
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        Expansion e;
        e.ok = expand_config_argument(int(argv.size()), argv.data(), e.arguments, e.sites,
                                      e.origins, e.check, e.config_path, e.errors);
        return e;
    }

    std::string dir_;
};

TEST_F(ConfigFileTest, TopLevelKeysBecomeArguments) {
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write(R"(
root = "/srv/www"
listen = ["127.0.0.1:8080", "[::1]:8080"]
threads = 2
access_log = "/var/log/lepus/access.log"
keepalive_timeout = "30s"
autoindex = true
no_pin = false
)"),
                                 config, errors));
    // toml++ orders keys by name; the order does not matter to the parser.
    std::vector<std::string> expected = {"--access-log",
                                         "/var/log/lepus/access.log",
                                         "--autoindex",
                                         "--keepalive-timeout",
                                         "30s",
                                         "--listen",
                                         "127.0.0.1:8080",
                                         "--listen",
                                         "[::1]:8080",
                                         "--root",
                                         "/srv/www",
                                         "--threads",
                                         "2"};
    EXPECT_EQ(config.arguments, expected);
    EXPECT_EQ(config.origins["--threads"], dir_ + "/lepus.toml:4:11");
}

TEST_F(ConfigFileTest, SyntaxErrorHasLineAndColumn) {
    ConfigFile config;
    std::vector<std::string> errors;
    EXPECT_FALSE(load_config_file(write("threads = 2\nlisten = [\n"), config, errors));
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("lepus.toml:"), std::string::npos) << errors[0];
}

TEST_F(ConfigFileTest, MissingFileIsAnError) {
    ConfigFile config;
    std::vector<std::string> errors;
    EXPECT_FALSE(load_config_file(dir_ + "/nope.toml", config, errors));
    ASSERT_EQ(errors.size(), 1u);
}

TEST_F(ConfigFileTest, Sites) {
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write(R"(
[[site]]
server_names = ["example.com", "www.example.com"]
root = "/srv/example"
index = ["index.php", "index.html"]
fastcgi = { address = "unix:/run/php/php8.2-fpm.sock", pool = 4, timeout = "30s" }
error_page.404 = "/404.html"
headers = [ { match = "*.css", name = "Cache-Control", value = "max-age=3600" } ]
redirects = [ { from = "/old", to = "/new", status = 308 } ]

[[site]]
server_names = "*.example.org"
root = "/srv/org"
default = true
dotfiles = "allow"
)"),
                                 config, errors))
        << (errors.empty() ? "" : errors[0]);
    ASSERT_EQ(config.sites.size(), 2u);
    const SiteConfig& first = config.sites[0];
    EXPECT_EQ(first.server_names.size(), 2u);
    EXPECT_FALSE(first.is_default);
    EXPECT_EQ(first.index->front(), "index.php");
    EXPECT_EQ(first.fastcgi->addresses, std::vector<std::string>{"unix:/run/php/php8.2-fpm.sock"});
    EXPECT_EQ(*first.fastcgi->pool, 4u);
    EXPECT_EQ(*first.fastcgi->timeout_ms, 30000u);
    EXPECT_EQ(first.error_pages.at(404), "/404.html");
    EXPECT_EQ(first.headers.at(0).name, "Cache-Control");
    EXPECT_EQ(first.redirects.at(0).status, 308);
    EXPECT_TRUE(config.sites[1].is_default);
    EXPECT_TRUE(*config.sites[1].dotfiles_allow);
}

TEST_F(ConfigFileTest, SiteProxy) {
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write(R"(
[[site]]
root = "/srv/a"
proxy = { address = ["127.0.0.1:3000", "unix:/run/app.sock"], paths = ["/api/"], host = "in", pool = 4, queue = 2, timeout = "5s" }
[[site]]
root = "/srv/b"
proxy = "http://127.0.0.1:3001"
)"),
                                 config, errors))
        << (errors.empty() ? "" : errors[0]);
    const SiteProxy& a = *config.sites[0].proxy;
    EXPECT_EQ(a.addresses, (std::vector<std::string>{"127.0.0.1:3000", "unix:/run/app.sock"}));
    EXPECT_EQ(a.paths, std::vector<std::string>{"/api/"});
    EXPECT_EQ(a.host, "in");
    EXPECT_EQ(*a.pool, 4u);
    EXPECT_EQ(*a.queue, 2u);
    EXPECT_EQ(*a.timeout_ms, 5000u);
    const SiteProxy& b = *config.sites[1].proxy;
    EXPECT_EQ(b.addresses, std::vector<std::string>{"http://127.0.0.1:3001"});
    EXPECT_TRUE(b.paths.empty());

    errors.clear();
    EXPECT_FALSE(load_config_file(
        write("[[site]]\nroot = \"/a\"\nproxy = { paths = [\"api\"], retries = 2 }\n"), config,
        errors));
    ASSERT_EQ(errors.size(), 3u);
    std::string all = errors[0] + errors[1] + errors[2];
    for (const char* message :
         {"unknown key 'retries' in proxy", "proxy needs an 'address'", "proxy paths start with /"})
        EXPECT_NE(all.find(message), std::string::npos) << all;
}

// Several backends for FastCGI as for the proxy, and how they are balanced (issue 36).
TEST_F(ConfigFileTest, BalancedBackends) {
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write(R"(
[[site]]
root = "/srv/a"
fastcgi = { address = ["unix:/run/php/a.sock", "unix:/run/php/b.sock"], weights = [3, 1] }
proxy = { address = ["127.0.0.1:3000", "127.0.0.1:3001"], balance = "hash", hash_key = "cookie:sid" }
[[site]]
root = "/srv/b"
fastcgi = { address = "unix:/run/php/a.sock", balance = "least_conn" }
)"),
                                 config, errors))
        << (errors.empty() ? "" : errors[0]);
    const SiteFastCgi& fastcgi = *config.sites[0].fastcgi;
    EXPECT_EQ(fastcgi.addresses.size(), 2u);
    EXPECT_EQ(fastcgi.balancing.weights, (std::vector<unsigned>{3, 1}));
    EXPECT_EQ(fastcgi.balancing.balance, upstream::Balance::RoundRobin);
    const SiteProxy& proxy = *config.sites[0].proxy;
    EXPECT_EQ(proxy.balancing.balance, upstream::Balance::Hash);
    EXPECT_EQ(proxy.balancing.key.source, upstream::HashKey::Source::Cookie);
    EXPECT_EQ(proxy.balancing.key.name, "sid");
    EXPECT_EQ(config.sites[1].fastcgi->balancing.balance, upstream::Balance::LeastConn);

    errors.clear();
    EXPECT_FALSE(load_config_file(write(R"(
[[site]]
root = "/a"
fastcgi = { address = ["unix:/a", "unix:/b"], weights = [1], balance = "random" }
proxy = { address = "127.0.0.1:1", hash_key = "header:X-User", weights = [0] }
)"),
                                  config, errors));
    std::string all;
    for (const std::string& error : errors)
        all += error + "\n";
    for (const char* message :
         {"'balance' is \"round_robin\"", "fastcgi: 'weights' needs one weight per address",
          "proxy: 'hash_key' goes with balance = \"hash\"", "'weights' must be a positive"})
        EXPECT_NE(all.find(message), std::string::npos) << all;
}

TEST_F(ConfigFileTest, FirstSiteIsDefaultWhenNoneSaysSo) {
    ConfigFile config;
    std::vector<std::string> errors;
    ASSERT_TRUE(load_config_file(write("[[site]]\nroot = \"/a\"\n[[site]]\nroot = \"/b\"\n"),
                                 config, errors));
    EXPECT_TRUE(config.sites[0].is_default);
    EXPECT_FALSE(config.sites[1].is_default);
}

TEST_F(ConfigFileTest, UnknownAndInvalidSiteKeysAreErrorsWithPositions) {
    ConfigFile config;
    std::vector<std::string> errors;
    EXPECT_FALSE(load_config_file(write(R"([[site]]
root = "/a"
rot = "/b"
autoindex = "yes"
redirects = [ { from = "/x", to = "/y", status = 200 } ]
error_page.200 = "/ok.html"
)"),
                                  config, errors));
    ASSERT_EQ(errors.size(), 4u);
    EXPECT_NE(errors[0].find("lepus.toml:3:7: unknown key 'rot'"), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find(":4:"), std::string::npos) << errors[1];
    EXPECT_NE(errors[2].find("redirect status"), std::string::npos) << errors[2];
    EXPECT_NE(errors[3].find("error_page.200"), std::string::npos) << errors[3];
}

TEST_F(ConfigFileTest, ExpandPutsTheCommandLineFirstAndDropsWhatItSets) {
    std::string path = write("listen = [\"127.0.0.1:1\"]\nthreads = 4\nindex = [\"a\", \"b\"]\n"
                             "autoindex = true\n");
    Expansion e = expand({"lepus", "--config", path, "--threads", "2", "/srv", "--listen",
                          "127.0.0.1:2", "--autoindex"});
    ASSERT_TRUE(e.ok);
    EXPECT_FALSE(e.check);
    EXPECT_EQ(e.config_path, path);
    // The command line as given, then only what it does not set: the file's
    // listen, threads and autoindex are dropped, its index list is kept after
    // the positional root (which it therefore cannot swallow).
    std::vector<std::string> expected = {
        "lepus",       "--threads", "2", "/srv",    "--listen", "127.0.0.1:2",
        "--autoindex", "--index",   "a", "--index", "b"};
    EXPECT_EQ(e.arguments, expected);
}

TEST_F(ConfigFileTest, CheckFlagNeedsAConfig) {
    Expansion e = expand({"lepus", "-t"});
    EXPECT_FALSE(e.ok);
    EXPECT_TRUE(e.check);
}

} // namespace
} // namespace lepus
