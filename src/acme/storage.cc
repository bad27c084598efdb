#include "acme/storage.h"

#include "base/unique_fd.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus::acme {
namespace {

// A name as a folder: lower case, and nothing that could climb out of it
// (the names were checked as DNS names already; this is the second lock).
std::string folder_name(std::string name) {
    for (char& c : name) {
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        if (!plain) c = '_';
    }
    if (name.empty() || name[0] == '.') name.insert(0, "_");
    return name;
}

} // namespace

CertificatePaths certificate_paths(const std::string& state_dir,
                                   const std::vector<std::string>& names) {
    std::string folder =
        state_dir + "/certificates/" + folder_name(names.empty() ? "" : names.front());
    return {folder, folder + "/fullchain.pem", folder + "/privkey.pem", folder + "/.lock"};
}

std::string account_key_path(const std::string& state_dir, const std::string& directory_url) {
    std::string host = directory_url;
    if (size_t scheme = host.find("://"); scheme != std::string::npos) host.erase(0, scheme + 3);
    host = host.substr(0, host.find('/'));
    return state_dir + "/acme/accounts/" + folder_name(host) + "/account.key";
}

bool make_private_folder(const std::string& path, std::string& error) {
    for (size_t at = 1; at <= path.size(); ++at) {
        if (at != path.size() && path[at] != '/') continue;
        std::string prefix = path.substr(0, at);
        if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
            error = "cannot make folder '" + prefix + "': " + strerror(errno);
            return false;
        }
    }
    return true;
}

bool write_private_file(const std::string& path, const std::string& content, std::string& error) {
    std::string temporary = path + ".tmp";
    UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    bool ok = bool(fd) && ::fchmod(fd.get(), 0600) == 0;
    for (size_t at = 0; ok && at < content.size();) {
        ssize_t n = ::write(fd.get(), content.data() + at, content.size() - at);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) at += size_t(n);
    }
    ok = ok && ::fsync(fd.get()) == 0 && ::rename(temporary.c_str(), path.c_str()) == 0;
    if (!ok) {
        error = "cannot write '" + path + "': " + strerror(errno);
        ::unlink(temporary.c_str());
    }
    return ok;
}

std::vector<std::string> on_demand_names(const std::string& state_dir) {
    std::vector<std::string> names;
    std::string folder = state_dir + "/certificates";
    DIR* listing = ::opendir(folder.c_str());
    if (!listing) return names;
    while (const dirent* entry = ::readdir(listing)) {
        std::string name = entry->d_name;
        if (name.starts_with(".")) continue;
        std::string marker = folder;
        marker.append("/").append(name).append("/on-demand");
        if (::access(marker.c_str(), F_OK) == 0) names.push_back(name);
    }
    ::closedir(listing);
    return names;
}

bool read_whole_file(const std::string& path, std::string& content) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    content.clear();
    char buffer[16384];
    for (;;) {
        ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) return true;
        content.append(buffer, size_t(n));
    }
}

} // namespace lepus::acme
