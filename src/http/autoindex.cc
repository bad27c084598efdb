#include "http/autoindex.h"

#include "http/open_beneath.h"
#include "http/path.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

struct Entry {
    std::string name;
    bool directory = false;
    uint64_t size = 0;
    time_t mtime = 0;
};

// Closes a DIR* (and the fd it owns).
struct DirCloser {
    void operator()(DIR* dir) const { closedir(dir); }
};

// Metadata of one entry, or false to leave it out of the listing.
bool describe(int root_fd, std::string_view rel_dir, int dir_fd, const char* name, Entry& entry) {
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (S_ISLNK(st.st_mode)) {
        // Follow the link only through the confined open, so a link leading out
        // of the root neither shows up nor leaks the size and date of its target.
        std::string rel(rel_dir);
        rel.append(name);
        UniqueFd target = open_beneath(root_fd, rel.c_str(), O_PATH);
        if (!target || fstat(target.get(), &st) != 0) return false;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return false;
    entry.name = name;
    entry.directory = S_ISDIR(st.st_mode);
    entry.size = uint64_t(st.st_size);
    entry.mtime = st.st_mtim.tv_sec;
    return true;
}

} // namespace

void append_html_escaped(std::string_view text, std::string& out) {
    for (char c : text) {
        switch (c) {
        case '&':
            out.append("&amp;");
            break;
        case '<':
            out.append("&lt;");
            break;
        case '>':
            out.append("&gt;");
            break;
        case '"':
            out.append("&quot;");
            break;
        case '\'':
            out.append("&#39;");
            break;
        default:
            out.push_back(c);
        }
    }
}

int render_autoindex(int root_fd, std::string_view rel_dir, int dir_fd, std::string_view url_path,
                     bool show_hidden, std::string& out) {
    int own_fd = dup(dir_fd); // fdopendir takes ownership of the fd it is given
    if (own_fd < 0) return errno;
    std::unique_ptr<DIR, DirCloser> dir(fdopendir(own_fd));
    if (!dir) {
        int saved = errno;
        close(own_fd);
        return saved;
    }
    rewinddir(dir.get());

    std::vector<Entry> entries;
    while (true) {
        errno = 0; // readdir signals an error only through errno
        dirent* item = readdir(dir.get());
        if (!item) break;
        std::string_view name(item->d_name);
        if (name == "." || name == "..") continue;
        if (name[0] == '.' && !show_hidden) continue;
        Entry entry;
        if (describe(root_fd, rel_dir, dir_fd, item->d_name, entry))
            entries.push_back(std::move(entry));
    }
    if (errno != 0) return errno;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.directory != b.directory) return a.directory;
        return a.name < b.name;
    });

    out.append("<html><head><title>Index of ");
    append_html_escaped(url_path, out);
    out.append("</title></head><body><h1>Index of ");
    append_html_escaped(url_path, out);
    out.append("</h1><hr><pre>");
    if (url_path != "/") out.append("<a href=\"../\">../</a>\n");
    for (const Entry& entry : entries) {
        out.append("<a href=\"");
        append_percent_encoded(entry.name, out);
        if (entry.directory) out.push_back('/');
        out.append("\">");
        append_html_escaped(entry.name, out);
        if (entry.directory) out.push_back('/');
        out.append("</a>");
        size_t shown = entry.name.size() + (entry.directory ? 1 : 0);
        out.append(shown < 50 ? 51 - shown : 1, ' ');

        char line[64];
        struct tm tm;
        gmtime_r(&entry.mtime, &tm);
        size_t length = strftime(line, sizeof line, "%d-%b-%Y %H:%M", &tm);
        out.append(line, length);
        if (entry.directory) {
            out.append(20, ' ');
            out.push_back('-');
        } else {
            int n = snprintf(line, sizeof line, "%21llu", (unsigned long long)entry.size);
            out.append(line, size_t(n));
        }
        out.push_back('\n');
    }
    out.append("</pre><hr></body></html>\n");
    return 0;
}

} // namespace lepus
