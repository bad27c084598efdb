#include "http/mime_types.h"

#include <fstream>

namespace lepus {
namespace {

struct MimeEntry {
    std::string_view extension;
    std::string_view type;
};

// The built-in list, generated at build time from mime_types.list. It wins over
// /etc/mime.types so the types the web depends on do not change with the
// distribution (Debian's file maps .ts to Qt Linguist, not MPEG-TS).
constexpr MimeEntry kBuiltinTypes[] = {
#include "mime_types_table.inc"
};

constexpr std::string_view kDefaultType = "application/octet-stream";

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

} // namespace

MimeTypes::MimeTypes() {
    for (const MimeEntry& entry : kBuiltinTypes)
        add(entry.extension, entry.type);
}

const MimeTypes& MimeTypes::system() {
    static const MimeTypes table = [] {
        MimeTypes types;
        types.add_file("/etc/mime.types");
        return types;
    }();
    return table;
}

bool MimeTypes::add_file(const char* path) {
    std::ifstream file(path);
    if (!file) return false;
    std::string line;
    while (std::getline(file, line)) {
        std::string_view rest(line);
        if (size_t hash = rest.find('#'); hash != std::string_view::npos)
            rest = rest.substr(0, hash);
        std::string_view type;
        while (!rest.empty()) {
            while (!rest.empty() && is_space(rest.front()))
                rest.remove_prefix(1);
            size_t end = 0;
            while (end < rest.size() && !is_space(rest[end]))
                ++end;
            if (end == 0) break;
            std::string_view word = rest.substr(0, end);
            rest.remove_prefix(end);
            if (type.empty()) {
                type = word;
            } else if (!types_.contains(word)) {
                add(word, type);
            }
        }
    }
    return true;
}

void MimeTypes::add(std::string_view extension, std::string_view type) {
    std::string key(extension);
    for (char& c : key)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    std::string value(type);
    // Textual types get an explicit charset so browsers do not sniff one.
    if (type.starts_with("text/") || type == "application/json") value += "; charset=utf-8";
    types_.emplace(std::move(key), std::move(value));
}

std::string_view MimeTypes::lookup(std::string_view file_name) const {
    size_t slash = file_name.rfind('/');
    if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
    size_t dot = file_name.rfind('.');
    if (dot == std::string_view::npos || dot + 1 == file_name.size()) return kDefaultType;
    std::string_view extension = file_name.substr(dot + 1);
    char lower[32];
    if (extension.size() > sizeof lower) return kDefaultType;
    for (size_t i = 0; i < extension.size(); ++i) {
        char c = extension[i];
        lower[i] = c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
    }
    auto it = types_.find(std::string_view(lower, extension.size()));
    return it == types_.end() ? kDefaultType : std::string_view(it->second);
}

} // namespace lepus
