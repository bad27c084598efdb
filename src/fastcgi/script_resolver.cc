#include "fastcgi/script_resolver.h"

#include "fastcgi/cgi_params.h"
#include "http/open_beneath.h"
#include "http/path.h"
#include "http/static_handler.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>

namespace lepus::fastcgi {

std::unique_ptr<ScriptResolver> ScriptResolver::create(const ScriptResolverOptions& options,
                                                       std::string& error) {
    UniqueFd root(open(options.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    char resolved[PATH_MAX];
    if (!root || !realpath(options.root.c_str(), resolved)) {
        error = "root \"" + options.root + "\": " + strerror(errno);
        return nullptr;
    }
    std::string document_root = resolved;
    while (document_root.size() > 1 && document_root.back() == '/')
        document_root.pop_back();
    if (document_root == "/") document_root.clear(); // SCRIPT_FILENAME = "" + "/x.php"
    return std::unique_ptr<ScriptResolver>(
        new ScriptResolver(options, std::move(root), std::move(document_root)));
}

ScriptResolver::ScriptResolver(ScriptResolverOptions options, UniqueFd root,
                               std::string document_root)
    : options_(std::move(options)), root_(std::move(root)),
      document_root_(std::move(document_root)) {
    for (const std::string& extension : options_.extensions)
        extension_views_.push_back(extension);
}

bool ScriptResolver::is_script_name(std::string_view name) const {
    for (std::string_view extension : extension_views_)
        if (!extension.empty() && name.size() > extension.size() && name.ends_with(extension))
            return true;
    return false;
}

RouteKind ScriptResolver::route(const Request& request, uint64_t now_ms) {
    // Undecodable paths and "OPTIONS *" are the static handler's to refuse.
    if (decode_path(request.path, path_) != 0) return RouteKind::Static;
    if (!options_.dotfiles_allow && has_hidden_segment(path_)) return RouteKind::Static;

    if (path_.back() == '/') {
        if (now_ms != 0) {
            auto memo = static_directories_.find(std::string_view(path_));
            if (memo != static_directories_.end() && now_ms >= memo->second &&
                now_ms - memo->second < kDirectoryMemoMs)
                return RouteKind::Static;
        }
        // "/x.php/a/" is the script /x.php with PATH_INFO "/a/" when /x.php is
        // a file, as nginx's fastcgi_split_path_info ^(.+?\.php)(/.*)$ splits it
        // whatever the path ends with (Nextcloud's /remote.php/dav/files/u/).
        // Otherwise, a directory named "x.php/" included, it is a folder.
        if (auto split = split_script_path(path_, extension_views_)) {
            script_name_.assign(split->script_name);
            path_info_.assign(split->path_info);
            if (script(script_name_, path_info_) == RouteKind::Script) return RouteKind::Script;
            if (status_ != 404) return RouteKind::Error; // refused (403): said, not hidden
        }
        // A directory: the first index that exists decides (as the static
        // handler's lookup); only a script index comes here.
        for (const std::string& index : options_.index) {
            rel_.assign(path_, 1, std::string::npos).append(index);
            bool is_directory = false;
            int status = check_regular_file(rel_, is_directory);
            if (status == 404 || is_directory) continue;
            if (status != 0 || !is_script_name(index)) return remember_static_directory(now_ms);
            script_name_.assign(path_).append(index);
            return script(script_name_, {});
        }
        return remember_static_directory(now_ms);
    }
    auto split = split_script_path(path_, extension_views_);
    if (!split) return RouteKind::Static;
    script_name_.assign(split->script_name);
    path_info_.assign(split->path_info);
    return script(script_name_, path_info_);
}

RouteKind ScriptResolver::script_with_path_info(std::string_view path) {
    if (!options_.dotfiles_allow && has_hidden_segment(path)) return RouteKind::Static;
    auto split = split_script_path(path, extension_views_);
    if (!split || split->path_info.empty()) return RouteKind::Static;
    script_name_.assign(split->script_name);
    path_info_.assign(split->path_info);
    RouteKind kind = script(script_name_, path_info_);
    return kind == RouteKind::Error && status_ == 404 ? RouteKind::Static : kind;
}

RouteKind ScriptResolver::remember_static_directory(uint64_t now_ms) {
    if (now_ms == 0) return RouteKind::Static;
    if (static_directories_.size() >= kDirectoryMemoEntries) static_directories_.clear();
    static_directories_.insert_or_assign(path_, now_ms);
    return RouteKind::Static;
}

RouteKind ScriptResolver::script(std::string_view script_name, std::string_view path_info) {
    if (path_info.data() != path_info_.data()) path_info_.assign(path_info);
    rel_.assign(script_name.substr(1));
    bool is_directory = false;
    status_ = check_regular_file(rel_, is_directory);
    if (status_ == 0 && is_directory) status_ = 404;
    if (status_ != 0) return RouteKind::Error;
    script_filename_.assign(document_root_).append(script_name);
    return RouteKind::Script;
}

int ScriptResolver::check_regular_file(const std::string& rel_path, bool& is_directory) {
    // O_PATH: nothing is read, so no open of a FIFO can block, and nothing
    // about the file is disclosed beyond what fstat says.
    UniqueFd fd = open_confined(root_.get(), rel_path.c_str(), O_PATH, options_.symlinks);
    struct stat st;
    if (!fd || fstat(fd.get(), &st) != 0) return status_for_errno(errno);
    is_directory = S_ISDIR(st.st_mode);
    if (is_directory) return 0;
    return S_ISREG(st.st_mode) ? 0 : 404;
}

} // namespace lepus::fastcgi
