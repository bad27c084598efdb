#include "http/autoindex.h"

#include "http/http_date.h"
#include "http/open_beneath.h"
#include "http/path.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
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

bool is_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

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

// Reads the directory into `entries`, sorted directories first, then by name.
// Returns 0 or errno.
int collect_entries(int root_fd, std::string_view rel_dir, int dir_fd, bool show_hidden,
                    std::vector<Entry>& entries) {
    int own_fd = dup(dir_fd); // fdopendir takes ownership of the fd it is given
    if (own_fd < 0) return errno;
    std::unique_ptr<DIR, DirCloser> dir(fdopendir(own_fd));
    if (!dir) {
        int saved = errno;
        close(own_fd);
        return saved;
    }
    rewinddir(dir.get());
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
    return 0;
}

// The visible name of one HTML line, padded to the column: nginx cuts a name
// longer than the column to 47 characters and "..>", and counts characters,
// not bytes, so UTF-8 names line up with ASCII ones.
void append_html_name(const Entry& entry, std::string& out) {
    size_t shown = utf8_length(entry.name) + (entry.directory ? 1 : 0);
    if (shown > kAutoindexNameWidth) {
        size_t kept = utf8_prefix_bytes(entry.name, kAutoindexNameWidth - 3);
        append_html_escaped(std::string_view(entry.name).substr(0, kept), out);
        out.append("..&gt;</a> ");
        return;
    }
    append_html_escaped(entry.name, out);
    if (entry.directory) out.push_back('/');
    out.append("</a>");
    out.append(kAutoindexNameWidth + 1 - shown, ' ');
}

void append_html_listing(const std::vector<Entry>& entries, std::string_view url_path,
                         std::string& out) {
    out.append("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
               "<title>Index of ");
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
        append_html_name(entry, out);

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
}

// nginx's autoindex_format json: one object per line, "size" for files only.
void append_json_listing(const std::vector<Entry>& entries, std::string& out) {
    out.append("[\n");
    for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& entry = entries[i];
        out.append(R"({ "name":")");
        append_json_escaped(entry.name, out);
        out.append(entry.directory ? R"(", "type":"directory")" : R"(", "type":"file")");
        char date[kHttpDateLength];
        format_http_date(entry.mtime, date);
        out.append(R"(, "mtime":")").append(date, kHttpDateLength).append("\"");
        if (!entry.directory) {
            char size[24];
            int n = snprintf(size, sizeof size, "%llu", (unsigned long long)entry.size);
            out.append(", \"size\":").append(size, size_t(n));
        }
        out.append(i + 1 < entries.size() ? " },\n" : " }\n");
    }
    out.append("]\n");
}

// Length of the valid UTF-8 sequence (RFC 3629 §4) starting `text`, or 0 when
// its first byte does not start one: overlongs, surrogates and code points above
// U+10FFFF are invalid.
size_t valid_utf8_sequence(std::string_view text) {
    auto byte = [&](size_t i) { return i < text.size() ? (unsigned char)text[i] : 0; };
    unsigned char lead = byte(0);
    size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                    : lead >= 0xE0 && lead <= 0xEF ? 3
                    : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                   : 0;
    if (length == 0) return 0;
    for (size_t i = 1; i < length; ++i)
        if (!is_continuation(byte(i))) return 0;
    unsigned char second = byte(1);
    if (lead == 0xE0 && second < 0xA0) return 0; // overlong
    if (lead == 0xED && second > 0x9F) return 0; // surrogate
    if (lead == 0xF0 && second < 0x90) return 0; // overlong
    if (lead == 0xF4 && second > 0x8F) return 0; // above U+10FFFF
    return length;
}

bool has_parameter(std::string_view query, std::string_view wanted) {
    while (!query.empty()) {
        size_t end = query.find('&');
        if (query.substr(0, end) == wanted) return true;
        if (end == std::string_view::npos) break;
        query.remove_prefix(end + 1);
    }
    return false;
}

} // namespace

AutoindexFormat autoindex_format_for(std::string_view query) {
    return has_parameter(query, "format=json") ? AutoindexFormat::Json : AutoindexFormat::Html;
}

std::string_view autoindex_content_type(AutoindexFormat format) {
    // nginx sends plain application/json; RFC 8259 §11 defines no charset for it.
    return format == AutoindexFormat::Json ? "application/json" : "text/html; charset=utf-8";
}

int render_autoindex(int root_fd, std::string_view rel_dir, int dir_fd, std::string_view url_path,
                     bool show_hidden, AutoindexFormat format, std::string& out) {
    std::vector<Entry> entries;
    if (int error = collect_entries(root_fd, rel_dir, dir_fd, show_hidden, entries)) return error;
    if (format == AutoindexFormat::Json) {
        append_json_listing(entries, out);
    } else {
        append_html_listing(entries, url_path, out);
    }
    return 0;
}

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
            out.push_back((unsigned char)c < 0x20 || c == 0x7f ? '?' : c);
        }
    }
}

void append_json_escaped(std::string_view text, std::string& out) {
    static constexpr char kHex[] = "0123456789abcdef";
    while (!text.empty()) {
        auto c = static_cast<unsigned char>(text.front());
        if (c >= 0x80) {
            size_t length = valid_utf8_sequence(text);
            if (length == 0) {
                out.append("\\ufffd");
                length = 1;
            } else {
                out.append(text.substr(0, length));
            }
            text.remove_prefix(length);
            continue;
        }
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(char(c));
        } else if (c < 0x20 || c == 0x7f) {
            out.append("\\u00");
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 0xF]);
        } else {
            out.push_back(char(c));
        }
        text.remove_prefix(1);
    }
}

size_t utf8_length(std::string_view text) {
    size_t characters = 0;
    for (unsigned char c : text)
        if (!is_continuation(c)) ++characters;
    return characters;
}

size_t utf8_prefix_bytes(std::string_view text, size_t characters) {
    size_t seen = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (is_continuation((unsigned char)text[i])) continue;
        if (seen == characters) return i;
        ++seen;
    }
    return text.size();
}

} // namespace lepus
