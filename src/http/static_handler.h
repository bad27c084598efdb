// StaticHandler: serves files below a document root — path normalisation,
// confined open, directory redirect / index / autoindex, conditional and range
// requests, precompressed ".gz" siblings — producing a ready-to-send Response.
// One per reactor thread: not thread-safe, no locks, its own FileCache.
#pragma once

#include "base/unique_fd.h"
#include "http/compress.h"
#include "http/file_cache.h"
#include "http/open_beneath.h"
#include "http/range.h"
#include "http/request.h"
#include "http/response.h"

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace lepus {

class MimeTypes;

struct StaticOptions {
    std::string root;                                // document root directory
    std::vector<std::string> index = {"index.html"}; // --index, tried in order
    bool autoindex = false;                          // --autoindex
    bool dotfiles_allow = false;                     // --dotfiles allow
    SymlinkPolicy symlinks = SymlinkPolicy::Beneath; // --symlinks
    // --compress: text files (http/compress.h) compressed once per coding and
    // kept with the cached file; precompressed .gz/.br/.zst siblings either way.
    bool compress = true;
    size_t compress_max = size_t{8} << 20; // larger files go out as they are
    // Smaller files are kept in memory and go out with the head in one writev:
    // at 100 KiB that beats writev + sendfile by about a quarter (BENCHMARKS.md),
    // as h2o found. Up to memory_budget bytes per handler (per reactor and site);
    // beyond it, files are sent with sendfile.
    size_t small_file_limit = size_t{128} * 1024;
    size_t memory_budget = 32 << 20;
    size_t cache_entries = 4096; // open-file cache bound (LRU)
    uint32_t cache_revalidate_ms = 1000;
    // A backend of the site (FastCGI, a proxy) takes methods the files do not:
    // the files answer an extension method (PROPFIND) 405 with Allow, as a
    // method known for other resources (RFC 9110 §15.5.6); without one, 501,
    // since nothing on the site recognises it (§15.6.2).
    bool backend_methods = false;
};

class StaticHandler {
public:
    // Opens the root (O_PATH|O_DIRECTORY); nullptr and a one-line `error` when it
    // is missing or not a directory. Also loads the MIME table (/etc/mime.types).
    static std::unique_ptr<StaticHandler> create(const StaticOptions& options, std::string& error);

    // Fills `out` for `request` (any method) on a static path. `keep_alive` is the
    // connection's decision (request.keep_alive, possibly forced off); `now_ms`
    // (monotonic) feeds the cache revalidation. The engine adds Date.
    void handle(const Request& request, bool keep_alive, uint64_t now_ms, Response& out);

    // What a decoded path ("/a/b.css", "/a/") names under the root, for the
    // router's try_files: the same confinement and dotfile rule as handle().
    // Refused: handle() would answer 403 or 500 for it (a link --symlinks
    // refuses, a folder it may not search), which try_files must not take
    // for a missing file (issue 31). A cached file costs no system call.
    enum class Probe : uint8_t { Missing, File, Directory, Refused };
    Probe probe(std::string_view decoded_path, uint64_t now_ms);

    // Open-file cache counters, for the status page.
    uint64_t cache_hits() const { return cache_.hits(); }
    uint64_t cache_misses() const { return cache_.misses(); }
    size_t cache_size() const { return cache_.size(); }

private:
    StaticHandler(const StaticOptions& options, UniqueFd root);

    // Cache miss: opens what path_ names and either caches a file in `file` or
    // writes the whole response (redirect, listing, error) into `out`.
    void resolve(const Request& request, const ReplyContext& context, uint64_t now_ms,
                 Response& out, FileRef& file);
    // Opens rel_path beneath the root and fstats it; returns 0 or an HTTP status.
    int open_file(const std::string& rel_path, UniqueFd& fd, struct stat& st);
    // Caches the regular file `fd` (opened from rel_path) with its gzip sibling
    // under `key`; returns 0 or an HTTP status.
    int load(std::string_view key, std::string_view rel_path, UniqueFd fd, const struct stat& st,
             uint64_t now_ms, FileRef& file);
    // The representation `request` gets of `file`: identity, a sibling, or one
    // compressed now (kept in the entry); nullptr: none is acceptable (406).
    const FileVariant* choose_variant(const Request& request, CachedFile& file);
    // Compresses the file with `coding` into its variant slot; false when it cannot.
    bool make_variant(CachedFile& file, Coding coding);
    // 200 / 206 / 304 / 406 / 412 / 416 for a cached file.
    void serve(const Request& request, const ReplyContext& context, const FileRef& file,
               Response& out);
    // The body of a multipart/byteranges answer of `ranges` into out.owned_body
    // (RFC 9110 §14.6); false, with errno, when the file cannot be read.
    bool build_multipart(const FileVariant& variant, const RangeSet& ranges, Response& out);
    // Its 206 head: the multipart type and boundary, then the variant's other fields.
    void finish_multipart(const FileVariant& variant, const ReplyContext& context, Response& out);
    // The most bytes of ranges a multipart answer gathers in memory; more,
    // and the whole representation goes instead (200).
    static constexpr uint64_t kMultipartMemoryMax = uint64_t{1} << 20;
    // lepus::status_for_errno, reporting the 500s.
    int status_for_errno(int error_number, std::string_view what);

    StaticOptions options_;
    UniqueFd root_;
    const MimeTypes& mime_types_;
    FileCache cache_;
    std::string path_;     // the decoded, normalised path of the current request
    std::string rel_;      // scratch: a path relative to the root
    std::string boundary_; // of the current multipart/byteranges answer
};

// The one errno -> status mapping for file access: ENOENT, ENOTDIR, ENAMETOOLONG
// -> 404; EACCES, ELOOP, EMLINK, EXDEV -> 403; anything else -> 500.
int status_for_errno(int error_number);

// True when an Accept-Encoding value accepts gzip (listed with q > 0).
bool accepts_gzip(std::string_view accept_encoding);

// Whether an entity-tag list (If-Match / If-None-Match value) matches `etag`:
// "*" matches anything; `weak` selects weak comparison (RFC 9110 §8.8.3.2).
bool etag_list_matches(std::string_view list, std::string_view etag, bool weak);

} // namespace lepus
