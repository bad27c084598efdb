// ScriptResolver: decides, before anything is sent to php-fpm, whether a
// request names a FastCGI script, and checks that the script is a regular file
// under the document root, opened with the same confinement as the static
// handler (open_beneath) and the same dotfile rule.
//
// That check is what keeps "/uploads/evil.jpg/x.php" from ever executing
// evil.jpg: the split names "/uploads/evil.jpg/x.php" as the script, which does
// not exist, so lepus answers 404 and php-fpm never hears of it.
#pragma once

#include "base/string_hash.h"
#include "base/unique_fd.h"
#include "http/open_beneath.h"
#include "http/request.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lepus::fastcgi {

struct ScriptResolverOptions {
    std::string root;                    // document root (made absolute for DOCUMENT_ROOT)
    std::vector<std::string> extensions; // --fastcgi-ext, e.g. ".php"
    std::vector<std::string> index;      // --index, tried in order for directories
    bool dotfiles_allow = false;
    SymlinkPolicy symlinks = SymlinkPolicy::Beneath; // --symlinks, as for the files
};

enum class RouteKind : uint8_t {
    Static, // not a script: the static handler answers (including its own errors)
    Script, // a script that exists: send it to php-fpm
    Error,  // looks like a script but cannot be run: answer status()
};

class ScriptResolver {
public:
    // Opens the root; nullptr and one line in `error` when it cannot.
    static std::unique_ptr<ScriptResolver> create(const ScriptResolverOptions& options,
                                                  std::string& error);

    // Routes `request`. For Script, script_name(), path_info() and
    // script_filename() are valid until the next call. `now_ms` (0: never)
    // lets a directory whose index is not a script skip the index probes for
    // kDirectoryMemoMs, as the static handler's file cache revalidates.
    RouteKind route(const Request& request, uint64_t now_ms = 0);

    // For try_files: whether the decoded `path` is a script followed by a
    // PATH_INFO ("/remote.php/dav/x", /remote.php a file), which nginx's
    // `location ~ \.php(/|$)` takes before try_files. Script when it is,
    // Error (status()) when the script is refused (403), else Static (no
    // such form, or no such script). A path without PATH_INFO is Static: the
    // files' probe answers for it.
    RouteKind script_with_path_info(std::string_view path);

    static constexpr uint64_t kDirectoryMemoMs = 1000;
    static constexpr size_t kDirectoryMemoEntries = 1024;
    // The HTTP status for RouteKind::Error (404, 403).
    int status() const { return status_; }
    std::string_view script_name() const { return script_name_; }
    std::string_view path_info() const { return path_info_; }
    std::string_view script_filename() const { return script_filename_; }
    std::string_view document_root() const { return document_root_; }

private:
    ScriptResolver(ScriptResolverOptions options, UniqueFd root, std::string document_root);
    bool is_script_name(std::string_view name) const;
    // 0 when rel_path is a regular file under the root, else the errno-derived status
    // (404 for anything but a regular file, so a directory named x.php is not run).
    int check_regular_file(const std::string& rel_path, bool& is_directory);
    RouteKind script(std::string_view script_name, std::string_view path_info);
    // RouteKind::Static, remembering path_ (a directory) as of now_ms.
    RouteKind remember_static_directory(uint64_t now_ms);

    ScriptResolverOptions options_;
    std::vector<std::string_view> extension_views_;
    UniqueFd root_;
    std::string document_root_;
    std::string path_, rel_, script_name_, path_info_, script_filename_;
    int status_ = 0;
    // Decoded directory paths routed Static, and when their indexes were
    // probed: "/" of a PHP site with index.html costs two opens and a stat per
    // request without it (index.php missing, index.html found).
    std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>> static_directories_;
};

} // namespace lepus::fastcgi
