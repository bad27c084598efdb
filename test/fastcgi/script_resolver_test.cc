// ScriptResolver on a real directory tree.
#include "fastcgi/script_resolver.h"
#include "support/temp_dir.h"

#include <arpa/inet.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus::fastcgi {
namespace {

class ScriptResolverTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(temp_.ok());
        base_ = temp_.path();
        root_ = base_ + "/root";
        std::filesystem::create_directories(root_ + "/uploads");
        std::filesystem::create_directories(root_ + "/app");
        std::filesystem::create_directories(root_ + "/docs");
        std::filesystem::create_directories(root_ + "/dir.php");
        std::filesystem::create_directories(root_ + "/both");
        write("index.php", "<?php");
        write("info.php", "<?php");
        write("uploads/evil.jpg", "<?php system('id');");
        write("app/index.php", "<?php");
        write("docs/index.html", "<p>");
        write("both/index.html", "<p>");
        write("both/index.php", "<?php");
        write(".hidden.php", "<?php");
        std::ofstream(base_ + "/outside.php") << "<?php";
        symlink((base_ + "/outside.php").c_str(), (root_ + "/escape.php").c_str());
        mkfifo((root_ + "/fifo.php").c_str(), 0644);
        options_.root = root_;
        options_.extensions = {".php"};
        options_.index = {"index.php", "index.html"};
    }

    void write(const std::string& name, const std::string& contents) {
        std::ofstream(root_ + "/" + name) << contents;
    }

    RouteKind route(std::string_view path, uint64_t now_ms = 0) {
        if (!resolver_) {
            std::string error;
            resolver_ = ScriptResolver::create(options_, error);
            EXPECT_TRUE(resolver_) << error;
        }
        Request request;
        request.path = path;
        return resolver_->route(request, now_ms);
    }

    lepus::test::TempDir temp_{"scripts"};
    std::string base_, root_;
    ScriptResolverOptions options_;
    std::unique_ptr<ScriptResolver> resolver_;
};

TEST_F(ScriptResolverTest, ScriptThatExists) {
    ASSERT_EQ(route("/info.php"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/info.php");
    EXPECT_EQ(resolver_->path_info(), "");
    std::string real = std::filesystem::canonical(root_).string();
    EXPECT_EQ(resolver_->document_root(), real);
    EXPECT_EQ(resolver_->script_filename(), real + "/info.php");
}

TEST_F(ScriptResolverTest, PathInfoAndEncodedPath) {
    ASSERT_EQ(route("/info.php/a/b%20c"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/info.php");
    EXPECT_EQ(resolver_->path_info(), "/a/b c");
    ASSERT_EQ(route("/%69nfo.php"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/info.php");
    ASSERT_EQ(route("/app/../info.php"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/info.php");
}

// nginx's fastcgi_split_path_info ^(.+?\.php)(/.*)$ splits a path that ends in
// "/" too: Nextcloud's WebDAV folders are /remote.php/dav/files/USER/.
TEST_F(ScriptResolverTest, PathInfoEndingInSlashIsSplit) {
    for (uint64_t now_ms : {uint64_t{0}, uint64_t{5000}, uint64_t{5001}}) {
        ASSERT_EQ(route("/info.php/a/", now_ms), RouteKind::Script);
        EXPECT_EQ(resolver_->script_name(), "/info.php");
        EXPECT_EQ(resolver_->path_info(), "/a/");
    }
    ASSERT_EQ(route("/info.php/"), RouteKind::Script);
    EXPECT_EQ(resolver_->path_info(), "/");
    ASSERT_EQ(route("/app/index.php/dav/files/admin/"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/app/index.php");
    EXPECT_EQ(resolver_->path_info(), "/dav/files/admin/");
    // A folder named like a script stays a folder; a missing script is no
    // script (the files answer 404); a refused one is refused.
    EXPECT_EQ(route("/dir.php/"), RouteKind::Static);
    EXPECT_EQ(route("/uploads/evil.jpg/x.php/a/"), RouteKind::Static);
    EXPECT_EQ(route("/missing.php/a/"), RouteKind::Static);
    EXPECT_EQ(route("/escape.php/a/"), RouteKind::Error);
    EXPECT_EQ(resolver_->status(), 403);
    // The folder rule still holds for folders.
    ASSERT_EQ(route("/app/"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/app/index.php");
    EXPECT_EQ(resolver_->path_info(), "");
}

// try_files counts "/info.php/a" as found (nginx's `location ~ \.php(/|$)`).
TEST_F(ScriptResolverTest, ScriptWithPathInfoForTryFiles) {
    route("/"); // creates the resolver
    EXPECT_EQ(resolver_->script_with_path_info("/info.php/a"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/info.php");
    EXPECT_EQ(resolver_->path_info(), "/a");
    EXPECT_EQ(resolver_->script_with_path_info("/app/index.php/dav/x/"), RouteKind::Script);
    // No PATH_INFO (the files' probe answers), no script, a folder, a hidden
    // script, evil.jpg: not found. A refused script is said (403).
    for (std::string_view path : {"/info.php", "/missing.php/a", "/dir.php/a", "/.hidden.php/a",
                                  "/uploads/evil.jpg/x.php/a", "/app/", "/style.css"})
        EXPECT_EQ(resolver_->script_with_path_info(path), RouteKind::Static) << path;
    EXPECT_EQ(resolver_->script_with_path_info("/escape.php/a"), RouteKind::Error);
    EXPECT_EQ(resolver_->status(), 403);
}

TEST_F(ScriptResolverTest, EvilJpgIsNeverAScript) {
    EXPECT_EQ(route("/uploads/evil.jpg/x.php"), RouteKind::Error);
    EXPECT_EQ(resolver_->status(), 404);
    EXPECT_EQ(route("/uploads/evil.jpg%2Fx.php"), RouteKind::Error);
    EXPECT_EQ(route("/uploads/evil.jpg"), RouteKind::Static);
}

TEST_F(ScriptResolverTest, MissingDirectoryOrSpecialFileIs404) {
    EXPECT_EQ(route("/missing.php"), RouteKind::Error);
    EXPECT_EQ(resolver_->status(), 404);
    EXPECT_EQ(route("/dir.php"), RouteKind::Error);
    EXPECT_EQ(route("/fifo.php"), RouteKind::Error);
    EXPECT_EQ(route("/missing/x.php/info"), RouteKind::Error);
}

TEST_F(ScriptResolverTest, SymlinkOutOfTheRootIsRefused) {
    EXPECT_EQ(route("/escape.php"), RouteKind::Error);
    EXPECT_NE(resolver_->status(), 0);
}

TEST_F(ScriptResolverTest, HiddenScriptsAreLeftToTheStaticHandler) {
    // The static handler answers 404 for them under --dotfiles deny.
    EXPECT_EQ(route("/.hidden.php"), RouteKind::Static);
    options_.dotfiles_allow = true;
    resolver_.reset();
    EXPECT_EQ(route("/.hidden.php"), RouteKind::Script);
}

TEST_F(ScriptResolverTest, DirectoryIndexFollowsIndexOrder) {
    ASSERT_EQ(route("/"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/index.php");
    ASSERT_EQ(route("/app/"), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/app/index.php");
    EXPECT_EQ(route("/docs/"), RouteKind::Static);
    EXPECT_EQ(route("/both/"), RouteKind::Script);
    options_.index = {"index.html", "index.php"};
    resolver_.reset();
    EXPECT_EQ(route("/both/"), RouteKind::Static);
    EXPECT_EQ(route("/app/"), RouteKind::Script);
    EXPECT_EQ(route("/uploads/"), RouteKind::Static); // autoindex or 404: static
}

TEST_F(ScriptResolverTest, OtherPathsAreStatic) {
    EXPECT_EQ(route("/style.css"), RouteKind::Static);
    EXPECT_EQ(route("/app"), RouteKind::Static); // the static handler redirects
    EXPECT_EQ(route("*"), RouteKind::Static);
    EXPECT_EQ(route("/%00.php"), RouteKind::Static); // undecodable: the static 400
}

// A directory whose index is not a script is remembered for a second (the file
// cache's revalidation interval): no index probes per request, and an
// index.php added meanwhile takes over once the second has passed.
TEST_F(ScriptResolverTest, StaticDirectoryIsRememberedForASecond) {
    std::filesystem::create_directory(root_ + "/docs");
    write("docs/index.html", "<p>docs</p>");
    const uint64_t t0 = 5000;
    EXPECT_EQ(route("/docs/", t0), RouteKind::Static);
    write("docs/index.php", "<?php echo 1;");
    EXPECT_EQ(route("/docs/", t0 + ScriptResolver::kDirectoryMemoMs - 1), RouteKind::Static);
    EXPECT_EQ(route("/docs/", 0), RouteKind::Script); // without a time: probed every time
    EXPECT_EQ(route("/docs/", t0 + ScriptResolver::kDirectoryMemoMs), RouteKind::Script);
    EXPECT_EQ(resolver_->script_name(), "/docs/index.php");
    // A Script answer is not remembered: removing the script is seen at once.
    std::filesystem::remove(root_ + "/docs/index.php");
    EXPECT_EQ(route("/docs/", t0 + ScriptResolver::kDirectoryMemoMs + 1), RouteKind::Static);
}

} // namespace
} // namespace lepus::fastcgi
