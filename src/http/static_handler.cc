#include "http/static_handler.h"

#include "base/ascii.h"
#include "http/autoindex.h"
#include "http/http_date.h"
#include "http/mime_types.h"
#include "http/open_beneath.h"
#include "http/path.h"
#include "http/range.h"
#include "log/error_log.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>

namespace lepus {
namespace {

constexpr std::string_view kAllowed = "GET, HEAD, OPTIONS";

// The answer to a method other than GET and HEAD (or OPTIONS): what is allowed.
void build_allow_response(int status, const ReplyContext& context, Response& out) {
    build_error_response(status, context, out);
    out.head.add("Allow", kAllowed);
}

// O_NONBLOCK: opening a FIFO someone left in the root must not block the reactor
// (it is then refused as "not a regular file"); it changes nothing for reads of
// regular files. O_NOCTTY: a tty device must not become our controlling terminal.
constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY;

bool is_space(char c) {
    return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && is_space(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && is_space(text.back()))
        text.remove_suffix(1);
    return text;
}

// RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ).
bool is_zero_qvalue(std::string_view q) {
    if (q.empty() || q[0] != '0') return false;
    for (size_t i = 1; i < q.size(); ++i)
        if (q[i] != '0' && !(i == 1 && q[i] == '.')) return false;
    return true;
}

// A query may go back into a Location header only if it has nothing that could
// break the header (the parser should already have refused such bytes).
bool is_header_safe(std::string_view text) {
    for (unsigned char c : text)
        if (c <= 0x20 || c >= 0x7f) return false;
    return true;
}

// The --autoindex listing of the directory `dir_fd` (URL path `url_path`): HTML,
// or JSON when the query asks for it with format=json.
void serve_listing(int root_fd, int dir_fd, std::string_view rel_dir, std::string_view url_path,
                   std::string_view query, bool show_hidden, const ReplyContext& context,
                   Response& out) {
    AutoindexFormat format = autoindex_format_for(query);
    std::string listing;
    if (int error =
            render_autoindex(root_fd, rel_dir, dir_fd, url_path, show_hidden, format, listing)) {
        int status = status_for_errno(error);
        if (status == 500) report_internal_error("opendir", url_path, error);
        return build_error_response(status, context, out);
    }
    begin_head(200, context.keep_alive, out);
    out.head.add("Content-Type", autoindex_content_type(format));
    out.head.content_length = listing.size();
    if (!context.head_request) {
        out.owned_body = std::move(listing);
        out.body = out.owned_body;
    }
}

} // namespace

bool accepts_gzip(std::string_view accept_encoding) {
    // Accept-Encoding = #( codings [ weight ] ), weight = OWS ";" OWS "q=" qvalue.
    while (!accept_encoding.empty()) {
        size_t comma = accept_encoding.find(',');
        std::string_view element = accept_encoding.substr(0, comma);
        accept_encoding.remove_prefix(comma == std::string_view::npos ? accept_encoding.size()
                                                                      : comma + 1);
        size_t semicolon = element.find(';');
        if (!ascii_iequals(trim(element.substr(0, semicolon)), "gzip")) continue;
        while (semicolon != std::string_view::npos) {
            element.remove_prefix(semicolon + 1);
            semicolon = element.find(';');
            std::string_view parameter = trim(element.substr(0, semicolon));
            if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
                parameter[1] == '=')
                return !is_zero_qvalue(trim(parameter.substr(2)));
        }
        return true;
    }
    return false;
}

bool etag_list_matches(std::string_view list, std::string_view etag, bool weak) {
    // Our own tags are strong; the opaque part is what sits between the quotes.
    bool etag_weak = etag.starts_with("W/");
    std::string_view opaque = etag_weak ? etag.substr(2) : etag;
    if (!weak && etag_weak) return false;
    size_t pos = 0;
    while (pos < list.size()) {
        char c = list[pos];
        if (c == ' ' || c == '\t' || c == ',') {
            ++pos;
            continue;
        }
        if (c == '*') return true;
        bool candidate_weak = list.compare(pos, 2, "W/") == 0;
        if (candidate_weak) pos += 2;
        if (pos >= list.size() || list[pos] != '"') return false; // malformed: no match
        size_t close = list.find('"', pos + 1);
        if (close == std::string_view::npos) return false;
        std::string_view candidate = list.substr(pos, close + 1 - pos);
        // §8.8.3.2: strong comparison needs both tags strong; weak ignores W/.
        if (candidate == opaque && (weak || !candidate_weak)) return true;
        pos = close + 1;
    }
    return false;
}

std::unique_ptr<StaticHandler> StaticHandler::create(const StaticOptions& options,
                                                     std::string& error) {
    UniqueFd root(open(options.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) {
        error = "root \"" + options.root + "\": " + strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<StaticHandler>(new StaticHandler(options, std::move(root)));
}

StaticHandler::StaticHandler(const StaticOptions& options, UniqueFd root)
    : options_(options), root_(std::move(root)), mime_types_(MimeTypes::system()),
      cache_(root_.get(), options.cache_entries, options.cache_revalidate_ms) {}

void StaticHandler::handle(const Request& request, bool keep_alive, uint64_t now_ms,
                           Response& out) {
    out.reset();
    ReplyContext context;
    context.keep_alive = keep_alive;
    context.head_request = request.is_head();

    // RFC 9110 §9.3.7: "OPTIONS *" asks about the server itself.
    if (request.method == Method::Options && request.path == "*")
        return build_allow_response(204, context, out);
    if (int status = decode_path(request.path, path_))
        return build_error_response(status, context, out);
    if (request.method == Method::Options) return build_allow_response(204, context, out);
    if (request.method != Method::Get && request.method != Method::Head) {
        if (request.method == Method::Extension && !options_.backend_methods)
            return build_error_response(501, context, out);
        return build_allow_response(405, context, out);
    }
    if (!options_.dotfiles_allow && has_hidden_segment(path_))
        return build_error_response(404, context, out);

    FileRef file = cache_.find(path_, now_ms);
    if (!file) {
        resolve(request, context, now_ms, out, file);
        if (!file) return; // resolve wrote the response
    }
    serve(request, context, file, out);
}

void StaticHandler::resolve(const Request& request, const ReplyContext& context, uint64_t now_ms,
                            Response& out, FileRef& file) {
    bool directory_path = path_.back() == '/';
    rel_.assign(path_.size() == 1 ? std::string_view(".") : std::string_view(path_).substr(1));
    UniqueFd fd;
    struct stat st;
    if (int status = open_file(rel_, fd, st)) return build_error_response(status, context, out);

    if (S_ISREG(st.st_mode)) {
        if (int status = load(path_, rel_, std::move(fd), st, now_ms, file))
            build_error_response(status, context, out);
        return;
    }
    if (!S_ISDIR(st.st_mode)) return build_error_response(403, context, out);

    if (!directory_path) {
        // A directory named without its slash: relative links inside it would
        // resolve against the parent, so redirect like every server does.
        std::string location;
        append_percent_encoded(path_, location);
        location.push_back('/');
        if (!request.query.empty() && is_header_safe(request.query))
            location.append("?").append(request.query);
        build_error_response(301, context, out);
        return out.head.add("Location", location);
    }

    std::string rel_dir = path_.size() == 1 ? std::string() : path_.substr(1);
    for (const std::string& index : options_.index) {
        std::string rel_index = rel_dir + index;
        UniqueFd index_fd;
        struct stat index_st;
        int status = open_file(rel_index, index_fd, index_st);
        if (status == 404) continue;
        if (status != 0) return build_error_response(status, context, out);
        if (S_ISDIR(index_st.st_mode)) continue; // nginx too skips an index that is a directory
        if (!S_ISREG(index_st.st_mode)) return build_error_response(403, context, out);
        if ((status = load(path_, rel_index, std::move(index_fd), index_st, now_ms, file)))
            build_error_response(status, context, out);
        return;
    }
    if (options_.autoindex)
        return serve_listing(root_.get(), fd.get(), rel_dir, path_, request.query,
                             options_.dotfiles_allow, context, out);
    build_error_response(404, context, out);
}

StaticHandler::Probe StaticHandler::probe(std::string_view decoded_path, uint64_t now_ms) {
    if (decoded_path.empty() || decoded_path.front() != '/') return Probe::Missing;
    if (!options_.dotfiles_allow && has_hidden_segment(decoded_path)) return Probe::Missing;
    if (decoded_path.back() != '/' && cache_.find(decoded_path, now_ms)) return Probe::File;
    rel_.assign(decoded_path.size() == 1 ? std::string_view(".") : decoded_path.substr(1));
    UniqueFd fd = open_confined(root_.get(), rel_.c_str(), O_PATH, options_.symlinks);
    struct stat st;
    if (!fd || fstat(fd.get(), &st) != 0)
        return lepus::status_for_errno(errno) == 404 ? Probe::Missing : Probe::Refused;
    if (S_ISDIR(st.st_mode)) return Probe::Directory;
    // "$uri" names a file: a trailing slash on a file is not that file.
    return S_ISREG(st.st_mode) && decoded_path.back() != '/' ? Probe::File : Probe::Missing;
}

int StaticHandler::open_file(const std::string& rel_path, UniqueFd& fd, struct stat& st) {
    fd = open_confined(root_.get(), rel_path.c_str(), kOpenFlags, options_.symlinks);
    // Out of descriptors: the cache gives some back, once (issue 32).
    if (!fd && (errno == EMFILE || errno == ENFILE) && cache_.shed_descriptors()) {
        log_warn("out of file descriptors (RLIMIT_NOFILE): the open-file cache now keeps at "
                 "most %zu",
                 FileCache::descriptor_budget());
        fd = open_confined(root_.get(), rel_path.c_str(), kOpenFlags, options_.symlinks);
    }
    if (!fd || fstat(fd.get(), &st) != 0) return status_for_errno(errno, "open");
    return 0;
}

int StaticHandler::load(std::string_view key, std::string_view rel_path, UniqueFd fd,
                        const struct stat& st, uint64_t now_ms, FileRef& file) {
    auto entry = std::make_unique<CachedFile>();
    entry->key.assign(key);
    entry->rel_path.assign(rel_path);

    // gzip_static (and brotli_static, zstd): a regular "<file>.gz", ".br" or
    // ".zst" next to the file is an alternative representation; all carry
    // Vary so caches keep them apart. Any failure to open one just means "no
    // sibling".
    struct Sibling {
        const char* suffix;
        Coding coding;
        FileVariant* slot;
        UniqueFd fd;
        struct stat st;
    };
    Sibling siblings[] = {{".gz", Coding::Gzip, &entry->gzip, {}, {}},
                          {".br", Coding::Brotli, &entry->brotli, {}, {}},
                          {".zst", Coding::Zstd, &entry->zstd, {}, {}}};
    auto wanted = uint64_t(st.st_size);
    bool any_sibling = false;
    for (Sibling& sibling : siblings) {
        std::string path = entry->rel_path + sibling.suffix;
        sibling.fd = open_confined(root_.get(), path.c_str(), kOpenFlags, options_.symlinks);
        if (sibling.fd &&
            (fstat(sibling.fd.get(), &sibling.st) != 0 || !S_ISREG(sibling.st.st_mode)))
            sibling.fd.reset();
        if (!sibling.fd) continue;
        any_sibling = true;
        wanted += uint64_t(sibling.st.st_size);
    }

    entry->content_type = mime_types_.lookup(entry->rel_path);
    entry->compressible = options_.compress && is_compressible_type(entry->content_type) &&
                          uint64_t(st.st_size) >= kMinCompressLength &&
                          uint64_t(st.st_size) <= options_.compress_max;
    entry->vary = any_sibling || entry->compressible;
    // Past the memory budget, new entries keep only their fds (sendfile).
    size_t in_memory_limit =
        cache_.memory_bytes() + wanted <= options_.memory_budget ? options_.small_file_limit : 0;
    int error = load_file_variant(std::move(fd), st, entry->content_type, {}, entry->vary,
                                  in_memory_limit, entry->identity);
    for (Sibling& sibling : siblings)
        if (error == 0 && sibling.fd)
            error = load_file_variant(std::move(sibling.fd), sibling.st, entry->content_type,
                                      coding_name(sibling.coding), true, in_memory_limit,
                                      *sibling.slot);
    if (error != 0) return status_for_errno(error, "read");
    entry->checked_ms = now_ms;
    file = cache_.insert(std::move(entry));
    return 0;
}

namespace {

FileVariant& variant_slot(CachedFile& file, Coding coding) {
    switch (coding) {
    case Coding::Gzip:
        return file.gzip;
    case Coding::Brotli:
        return file.brotli;
    case Coding::Zstd:
        return file.zstd;
    case Coding::Identity:
        break;
    }
    return file.identity;
}

} // namespace

const FileVariant* StaticHandler::choose_variant(const Request& request, CachedFile& file) {
    if (!file.vary) return &file.identity; // nothing to choose: Accept-Encoding plays no part
    // A range is of the identity or of a file on disk, never of bytes made now;
    // a HEAD does not run a compressor for a body it will not send.
    bool ranged = !request.range.empty();
    bool may_make = file.compressible && !ranged && !request.is_head();
    auto usable = [&](const FileVariant& variant) {
        return (variant.present() && !(ranged && variant.made)) || may_make;
    };
    CodingSet offered;
    offered.gzip = usable(file.gzip);
    offered.brotli = usable(file.brotli);
    offered.zstd = usable(file.zstd);
    Negotiated chosen = negotiate_coding(request.accept_encoding, offered);
    if (!chosen.acceptable) return nullptr;
    if (chosen.coding == Coding::Identity) return &file.identity;
    FileVariant& slot = variant_slot(file, chosen.coding);
    if (slot.present() || make_variant(file, chosen.coding)) return &slot;
    // Could not compress (memory budget, a read error): identity, if the client takes it.
    CodingSet identity_only;
    return negotiate_coding(request.accept_encoding, identity_only).acceptable ? &file.identity
                                                                               : nullptr;
}

bool StaticHandler::make_variant(CachedFile& file, Coding coding) {
    const FileVariant& identity = file.identity;
    std::string contents;
    std::string_view source = identity.data;
    if (!identity.in_memory) {
        contents.resize(identity.size);
        size_t done = 0;
        while (done < identity.size) {
            ssize_t n =
                pread(identity.fd.get(), contents.data() + done, identity.size - done, off_t(done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            done += size_t(n);
        }
        source = contents;
    }
    std::string compressed = compress_once(coding, source);
    // Kept only within the memory budget; a coding that does not shrink the
    // file is not worth a variant (and would be compressed again each time).
    if (compressed.empty() || compressed.size() >= identity.size ||
        cache_.memory_bytes() + compressed.size() > options_.memory_budget)
        return false;
    size_t bytes = compressed.size();
    make_compressed_variant(identity, file.content_type, coding_name(coding), std::move(compressed),
                            variant_slot(file, coding));
    cache_.charge(file, bytes);
    return true;
}

void StaticHandler::serve(const Request& request, const ReplyContext& context, const FileRef& file,
                          Response& out) {
    const FileVariant* chosen = choose_variant(request, *file.get());
    bool vary = file->vary;
    if (!chosen) {
        // RFC 9110 §12.5.3: identity refused and no coding acceptable.
        build_error_response(406, context, out);
        return out.head.add("Vary", "Accept-Encoding");
    }
    const FileVariant& variant = *chosen;

    // RFC 9110 §13.2.2: If-Match, else If-Unmodified-Since; then If-None-Match,
    // else If-Modified-Since; then If-Range with Range.
    if (!request.if_match.empty()) {
        if (!etag_list_matches(request.if_match, variant.etag, false))
            return build_error_response(412, context, out);
    } else if (!request.if_unmodified_since.empty()) {
        std::optional<time_t> date = parse_http_date(request.if_unmodified_since);
        if (date && variant.mtime > *date) return build_error_response(412, context, out);
    }
    bool not_modified = false;
    if (!request.if_none_match.empty()) {
        not_modified = etag_list_matches(request.if_none_match, variant.etag, true);
    } else if (!request.if_modified_since.empty()) {
        std::optional<time_t> date = parse_http_date(request.if_modified_since);
        not_modified = date && variant.mtime <= *date;
    }
    if (not_modified) {
        // §15.4.5: 304 carries the validators and Vary, not the content headers.
        begin_head(304, context.keep_alive, out);
        out.head.add("Last-Modified", variant.last_modified_text());
        out.head.add("ETag", variant.etag);
        if (vary) out.head.add("Vary", "Accept-Encoding");
        return;
    }

    uint64_t offset = 0, length = variant.size;
    int status = 200;
    bool range_allowed = request.method == Method::Get && !request.range.empty();
    if (range_allowed && !request.if_range.empty()) {
        // §13.1.5: the range applies only to the representation the client has.
        std::string_view if_range = trim(request.if_range);
        if (if_range.starts_with("\"") || if_range.starts_with("W/")) {
            range_allowed = if_range == variant.etag; // strong comparison
        } else {
            std::optional<time_t> date = parse_http_date(if_range);
            range_allowed = date && *date == variant.mtime;
        }
    }
    if (range_allowed) {
        RangeSet ranges;
        switch (parse_range(request.range, variant.size, ranges)) {
        case RangeResult::Single:
            status = 206;
            offset = ranges.front().first;
            length = ranges.front().length();
            break;
        case RangeResult::Unsatisfiable: {
            std::string content_range = "bytes */";
            append_decimal(variant.size, content_range);
            build_error_response(416, context, out);
            return out.head.add("Content-Range", content_range);
        }
        case RangeResult::Multiple:
            // Larger: the whole representation (the parts are built in memory).
            // So too for a coded variant: its Content-Encoding would claim the
            // multipart body as a whole is coded.
            if (ranges.total_length() > kMultipartMemoryMax || &variant != &file->identity) break;
            if (build_multipart(variant, ranges, out))
                return finish_multipart(variant, context, out);
            report_internal_error("read", path_, errno);
            return build_error_response(500, context, out);
        case RangeResult::Ignore:
            break;
        }
    }

    // The variant's fields are shared, not copied: the HTTP/1.1 engine writes
    // their cached text in one piece (out.file keeps the variant alive).
    begin_head(status, context.keep_alive, out);
    out.head.set_block(variant.headers, variant.header_fields);
    if (status == 206) {
        std::string content_range = "bytes ";
        append_decimal(offset, content_range);
        content_range.push_back('-');
        append_decimal(offset + length - 1, content_range);
        content_range.push_back('/');
        append_decimal(variant.size, content_range);
        out.head.add("Content-Range", content_range);
    }
    out.head.content_length = length;

    if (context.head_request || length == 0) return;
    out.file = file;
    if (variant.in_memory) {
        out.body = std::string_view(variant.data).substr(offset, length);
        if (variant.fd) { // a file's bytes (not ones lepus compressed)
            out.body_file_fd = variant.fd.get();
            out.body_file_offset = offset;
        }
    } else {
        out.file_fd = variant.fd.get();
        out.file_offset = offset;
        out.file_length = length;
    }
}

namespace {

// The Content-Type value of a variant (load_file_variant puts it first).
std::string_view content_type_of(const FileVariant& variant) {
    if (variant.header_fields.empty()) return {};
    return variant.header_fields.front().value(variant.headers);
}

// Appends `range` of the variant's bytes; false (errno set) when a read fails.
bool append_range_bytes(const FileVariant& variant, ByteRange range, std::string& out) {
    if (variant.in_memory) {
        out.append(std::string_view(variant.data).substr(range.first, range.length()));
        return true;
    }
    size_t at = out.size();
    out.resize(at + range.length());
    uint64_t done = 0;
    while (done < range.length()) {
        ssize_t n = pread(variant.fd.get(), out.data() + at + done, range.length() - done,
                          off_t(range.first + done));
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) errno = EIO; // the file shrank under us
        if (n <= 0) return false;
        done += uint64_t(n);
    }
    return true;
}

} // namespace

bool StaticHandler::build_multipart(const FileVariant& variant, const RangeSet& ranges,
                                    Response& out) {
    std::string_view content_type = content_type_of(variant);
    boundary_ = make_multipart_boundary();
    out.owned_body.clear();
    for (size_t i = 0; i < ranges.count; ++i) {
        append_part_head(boundary_, content_type, ranges.ranges[i], variant.size, out.owned_body);
        if (!append_range_bytes(variant, ranges.ranges[i], out.owned_body)) return false;
    }
    append_multipart_end(boundary_, out.owned_body);
    return true;
}

void StaticHandler::finish_multipart(const FileVariant& variant, const ReplyContext& context,
                                     Response& out) {
    begin_head(206, context.keep_alive, out);
    // RFC 9110 §14.6: the type of the whole is multipart/byteranges; each part
    // carries the representation's own type.
    std::string content_type = "multipart/byteranges; boundary=";
    content_type.append(boundary_);
    out.head.add("Content-Type", content_type);
    std::string_view lines = variant.headers;
    for (const FieldAt& field : std::span(variant.header_fields).subspan(1))
        out.head.add(field.name(lines), field.value(lines));
    out.head.content_length = out.owned_body.size();
    out.body = out.owned_body;
}

int status_for_errno(int error_number) {
    // nginx ngx_http_static_module: missing -> 404, refused -> 403, the rest is ours.
    switch (error_number) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
        return 404;
    case EACCES:
    case ELOOP:  // a symlink refused by the walk, or a magic link
    case EMLINK: // O_NOFOLLOW on a symlink on some file systems
    case EXDEV:  // openat2 RESOLVE_BENEATH: the path tried to leave the root
    case ENXIO:  // open(2) on a unix socket in the root: not a file to serve
        return 403;
    default:
        return 500;
    }
}

int StaticHandler::status_for_errno(int error_number, std::string_view what) {
    int status = lepus::status_for_errno(error_number);
    if (status == 500) report_internal_error(what, path_, error_number);
    // A refused symlink (RESOLVE_BENEATH's EXDEV, the owner check's or the
    // walk's ELOOP) is a configuration matter: say which option decides.
    if (status == 403 && (error_number == EXDEV || error_number == ELOOP) &&
        options_.symlinks != SymlinkPolicy::Follow)
        log_warn("\"%s\": a symbolic link on the way is refused by --symlinks %s: 403 "
                 "(--symlinks follow or owner allows it)",
                 path_.c_str(), std::string(symlink_policy_name(options_.symlinks)).c_str());
    return status;
}

} // namespace lepus
