// FileCache: the per-reactor open-file cache of the static handler. A bounded LRU
// keyed by the normalised request path; each entry keeps the open fd, the
// metadata the response needs (size, mtime, ETag, preformatted header lines), the
// contents of small files, and the precompressed ".gz" sibling when one exists.
// Entries are revalidated against the file system at most once per interval.
// Single-threaded by design (one cache per reactor): no locks, plain refcounts.
#pragma once

#include "base/string_hash.h"
#include "base/unique_fd.h"
#include "http/http_date.h"
#include "http/response_head.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unordered_map>
#include <vector>

namespace lepus {

// One representation: the file itself, a precompressed sibling on disk
// (".gz", ".br", ".zst"), or one lepus compressed once and keeps in memory.
struct FileVariant {
    UniqueFd fd;
    uint64_t size = 0;
    time_t mtime = 0;       // seconds: Last-Modified and date conditionals
    timespec mtime_exact{}; // for revalidation
    ino_t inode = 0;
    dev_t device = 0;
    std::string etag;                      // "\"<mtime hex>-<size hex>\"" like nginx
    char last_modified[kHttpDateLength]{}; // IMF-fixdate of mtime
    // Content-Type .. Accept-Ranges (+ Content-Encoding, Vary): the HTTP/1.1
    // lines and where each field lies in them, a block every response of
    // the variant shares (ResponseHead::set_block), built once per file.
    std::string headers;
    std::vector<FieldAt> header_fields;
    std::string data; // the whole file when in_memory
    bool in_memory = false;
    bool made = false; // compressed by lepus: data holds it, no fd

    bool present() const { return fd.valid() || made; }
    void add_header(std::string_view name, std::string_view value) {
        append_field_line(name, value, headers, header_fields);
    }
    std::string_view last_modified_text() const { return {last_modified, kHttpDateLength}; }
    // Same file and same contents as `st` says (inode, device, size, mtime)?
    bool matches(const struct stat& st) const;
};

// Fills `out` from an open regular file: metadata, ETag, header lines (with
// `Content-Encoding: <encoding>` unless empty, `Vary: Accept-Encoding` when
// `vary`) and, when st.st_size < small_file_limit, its contents read with
// pread. Returns 0 or an errno value.
int load_file_variant(UniqueFd fd, const struct stat& st, std::string_view content_type,
                      std::string_view encoding, bool vary, size_t small_file_limit,
                      FileVariant& out);

// A variant lepus compressed itself from `identity`: `data` in memory, the
// identity's dates, a weak ETag (RFC 9110 §8.8.1: the bytes differ from the
// file's, the meaning does not), no Accept-Ranges (ranges get the identity).
void make_compressed_variant(const FileVariant& identity, std::string_view content_type,
                             std::string_view encoding, std::string data, FileVariant& out);

class CachedFile {
public:
    std::string key;      // normalised request path ("/docs/" for a directory's index)
    std::string rel_path; // the file opened, relative to the root ("docs/index.html")
    FileVariant identity;
    FileVariant gzip;   // rel_path + ".gz" when it is a regular file, else made on demand
    FileVariant brotli; // ".br", likewise
    FileVariant zstd;   // ".zst", likewise
    std::string_view content_type; // from the MIME table (static storage)
    bool compressible = false;     // lepus may compress it (type, size, --compress)
    bool vary = false;             // its responses carry Vary: Accept-Encoding
    uint64_t checked_ms = 0;       // last time it was found up to date

    // True when `bytes` lie within the contents a variant holds in memory:
    // then a FileRef to this entry alone keeps them alive (a variant's data
    // is written once, before any response points into it).
    bool holds(std::string_view bytes) const;

private:
    friend class FileRef;
    friend class FileCache;
    uint32_t refs_ = 0;       // FileRefs plus one while in the cache
    size_t charged_ = 0;      // bytes counted in FileCache::memory_bytes while cached
    uint8_t descriptors_ = 0; // fds counted in FileCache::descriptors_held while cached
    bool cached_ = false;
    CachedFile* lru_prev_ = nullptr; // towards the most recently used
    CachedFile* lru_next_ = nullptr;
};

// A counted reference to a CachedFile: the entry (its fd, its memory) lives until
// the last FileRef goes, even when the cache has evicted or replaced it.
class FileRef {
public:
    FileRef() = default;
    explicit FileRef(CachedFile* file) : file_(file) {
        if (file_) ++file_->refs_;
    }
    FileRef(const FileRef& other) : FileRef(other.file_) {}
    FileRef(FileRef&& other) noexcept : file_(other.file_) { other.file_ = nullptr; }
    FileRef& operator=(FileRef other) noexcept {
        std::swap(file_, other.file_);
        return *this;
    }
    ~FileRef() { reset(); }

    // Drops the reference (deleting the entry if it was the last one).
    void reset() {
        if (file_ && --file_->refs_ == 0) delete file_;
        file_ = nullptr;
    }
    CachedFile* get() const { return file_; }
    CachedFile* operator->() const { return file_; }
    explicit operator bool() const { return file_ != nullptr; }

private:
    CachedFile* file_ = nullptr;
};

class FileCache {
public:
    // root_fd: the directory rel_paths are relative to (not owned).
    FileCache(int root_fd, size_t capacity, uint32_t revalidate_ms);
    ~FileCache();
    FileCache(const FileCache&) = delete;
    FileCache& operator=(const FileCache&) = delete;

    // The entry for `key`, revalidated if its interval has passed; empty (and the
    // entry dropped) when missing or stale. Counts a hit or a miss.
    FileRef find(std::string_view key, uint64_t now_ms);

    // Adds `file` as the most recently used entry (replacing one with the same
    // key), evicting the least recently used beyond capacity.
    FileRef insert(std::unique_ptr<CachedFile> file);

    size_t size() const { return map_.size(); }
    // Bytes of file contents the entries hold in memory.
    size_t memory_bytes() const { return memory_bytes_; }
    // A variant made after insert() added `bytes` to `file` (counted until it goes).
    void charge(CachedFile& file, size_t bytes) {
        file.charged_ += bytes;
        if (file.cached_) memory_bytes_ += bytes;
    }
    uint64_t hits() const { return hits_; }
    uint64_t misses() const { return misses_; }
    uint64_t evictions() const { return evictions_; }

    // Every FileCache of the process (one per site and reactor) shares one
    // budget of descriptors, so that cached files never take the fds that
    // accept() and the backends need (issue 32: with `ulimit -n 1500`, 1,500
    // distinct files gave 500s and refused connections). Past it, insert()
    // evicts this cache's least recently used entries. The server sets it
    // from RLIMIT_NOFILE; unlimited until then.
    static void set_descriptor_budget(size_t descriptors);
    static size_t descriptor_budget();
    static size_t descriptors_held();
    // An open failed with EMFILE or ENFILE: lowers the budget to half of what
    // the caches hold and evicts this cache's entries down to it. False when
    // this cache had nothing to give back.
    bool shed_descriptors();

private:
    bool still_valid(const CachedFile& file) const;
    void remove(CachedFile* file);
    void link_front(CachedFile* file);
    void unlink(CachedFile* file);
    void evict_lru();

    int root_fd_;
    size_t capacity_;
    uint32_t revalidate_ms_;
    std::unordered_map<std::string_view, CachedFile*, StringHash, std::equal_to<>>
        map_;                        // keys view file->key
    CachedFile* lru_head_ = nullptr; // most recently used
    CachedFile* lru_tail_ = nullptr;
    uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
    size_t memory_bytes_ = 0;
};

} // namespace lepus
