// MimeTypes: file extension -> Content-Type value. Built from one list compiled
// in (generated from mime_types.list at build time), extended once at start-up by /etc/mime.types,
// then immutable and shared read-only by every reactor thread (no locks needed).
#pragma once

#include "base/string_hash.h"

#include <string>
#include <string_view>
#include <unordered_map>

namespace lepus {

class MimeTypes {
public:
    // The built-in list only.
    MimeTypes();

    // The process-wide table: the built-in list plus /etc/mime.types when it
    // exists, loaded on first use (thread-safe static initialisation). Call it
    // once at start-up so the file is read before the reactors run.
    static const MimeTypes& system();

    // Adds the extensions of a mime.types file ("type ext ext..." lines, '#'
    // comments) that the table does not know yet; the built-in list wins. Returns
    // false when the file cannot be read.
    bool add_file(const char* path);

    // Content-Type for a file name or path, from its extension (case-insensitive),
    // with "; charset=utf-8" for text/* (JavaScript included) and JSON;
    // "application/octet-stream" when unknown.
    std::string_view lookup(std::string_view file_name) const;

    size_t size() const { return types_.size(); }

private:
    void add(std::string_view extension, std::string_view type);

    std::unordered_map<std::string, std::string, StringHash, std::equal_to<>> types_;
};

} // namespace lepus
