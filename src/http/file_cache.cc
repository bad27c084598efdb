#include "http/file_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace lepus {
namespace {

// Shared by the reactors' caches: relaxed atomics, touched on misses only.
std::atomic<size_t> g_descriptors_held{0};
std::atomic<size_t> g_descriptor_budget{SIZE_MAX};

// Whatever the descriptor limit, a cache may keep this many files open.
constexpr size_t kMinDescriptorBudget = 16;

uint8_t descriptors_of(const CachedFile& file) {
    uint8_t count = 0;
    for (const FileVariant* variant : {&file.identity, &file.gzip, &file.brotli, &file.zstd})
        if (variant->fd.valid()) ++count;
    return count;
}

} // namespace

void FileCache::set_descriptor_budget(size_t descriptors) {
    g_descriptor_budget.store(std::max(descriptors, kMinDescriptorBudget),
                              std::memory_order_relaxed);
}

size_t FileCache::descriptor_budget() {
    return g_descriptor_budget.load(std::memory_order_relaxed);
}

size_t FileCache::descriptors_held() {
    return g_descriptors_held.load(std::memory_order_relaxed);
}

bool FileVariant::matches(const struct stat& st) const {
    return st.st_ino == inode && st.st_dev == device && uint64_t(st.st_size) == size &&
           st.st_mtim.tv_sec == mtime_exact.tv_sec && st.st_mtim.tv_nsec == mtime_exact.tv_nsec;
}

bool CachedFile::holds(std::string_view bytes) const {
    auto begin = reinterpret_cast<uintptr_t>(bytes.data());
    for (const FileVariant* variant : {&identity, &gzip, &brotli, &zstd}) {
        auto data = reinterpret_cast<uintptr_t>(variant->data.data());
        if (!variant->data.empty() && begin >= data &&
            begin + bytes.size() <= data + variant->data.size())
            return true;
    }
    return false;
}

int load_file_variant(UniqueFd fd, const struct stat& st, std::string_view content_type,
                      std::string_view encoding, bool vary, size_t small_file_limit,
                      FileVariant& out) {
    out.size = uint64_t(st.st_size);
    out.mtime = st.st_mtim.tv_sec;
    out.mtime_exact = st.st_mtim;
    out.inode = st.st_ino;
    out.device = st.st_dev;
    format_http_date(out.mtime, out.last_modified);

    char etag[48];
    int length = snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)out.mtime,
                          (unsigned long long)out.size);
    out.etag.assign(etag, size_t(length));

    out.headers.clear();
    out.header_fields.clear();
    out.add_header("Content-Type", content_type);
    if (!encoding.empty()) out.add_header("Content-Encoding", encoding);
    if (vary) out.add_header("Vary", "Accept-Encoding");
    out.add_header("Last-Modified", out.last_modified_text());
    out.add_header("ETag", out.etag);
    out.add_header("Accept-Ranges", "bytes");

    out.in_memory = out.size < small_file_limit;
    if (out.in_memory) {
        // Small files go out in the same writev as the head: read them once here.
        out.data.resize(out.size);
        size_t done = 0;
        while (done < out.size) {
            ssize_t n = pread(fd.get(), out.data.data() + done, out.size - done, off_t(done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return errno;
            if (n == 0) return EIO; // truncated under us; the next revalidation sees it
            done += size_t(n);
        }
    }
    out.fd = std::move(fd);
    return 0;
}

void make_compressed_variant(const FileVariant& identity, std::string_view content_type,
                             std::string_view encoding, std::string data, FileVariant& out) {
    out.size = data.size();
    out.mtime = identity.mtime;
    out.mtime_exact = identity.mtime_exact;
    out.inode = identity.inode;
    out.device = identity.device;
    std::copy(std::begin(identity.last_modified), std::end(identity.last_modified),
              std::begin(out.last_modified));
    out.etag = "W/" + identity.etag;
    out.headers.clear();
    out.header_fields.clear();
    out.add_header("Content-Type", content_type);
    out.add_header("Content-Encoding", encoding);
    out.add_header("Vary", "Accept-Encoding");
    out.add_header("Last-Modified", out.last_modified_text());
    out.add_header("ETag", out.etag);
    out.data = std::move(data);
    out.in_memory = true;
    out.made = true;
}

FileCache::FileCache(int root_fd, size_t capacity, uint32_t revalidate_ms)
    : root_fd_(root_fd), capacity_(capacity == 0 ? 1 : capacity), revalidate_ms_(revalidate_ms) {
    map_.reserve(capacity_);
}

FileCache::~FileCache() {
    while (lru_head_)
        remove(lru_head_);
}

FileRef FileCache::find(std::string_view key, uint64_t now_ms) {
    auto it = map_.find(key);
    if (it == map_.end()) {
        ++misses_;
        return {};
    }
    CachedFile* file = it->second;
    if (now_ms - file->checked_ms >= revalidate_ms_ || now_ms < file->checked_ms) {
        if (!still_valid(*file)) {
            remove(file);
            ++misses_;
            return {};
        }
        file->checked_ms = now_ms;
    }
    ++hits_;
    unlink(file);
    link_front(file);
    return FileRef(file);
}

// Compares what the path names now with what the entry holds. fstatat follows
// symlinks, but it only reads metadata: a path that now leads elsewhere (even
// outside the root) has another inode, which makes the entry stale, and the
// reopen goes through the confined open again.
bool FileCache::still_valid(const CachedFile& file) const {
    struct stat st;
    if (fstatat(root_fd_, file.rel_path.c_str(), &st, 0) != 0 || !file.identity.matches(st))
        return false;
    std::string gz_path = file.rel_path + ".gz";
    bool gz_exists = fstatat(root_fd_, gz_path.c_str(), &st, 0) == 0 && S_ISREG(st.st_mode);
    if (gz_exists != file.gzip.present()) return false;
    return !gz_exists || file.gzip.matches(st);
}

FileRef FileCache::insert(std::unique_ptr<CachedFile> owned) {
    CachedFile* file = owned.release();
    if (auto it = map_.find(std::string_view(file->key)); it != map_.end()) remove(it->second);
    while (map_.size() >= capacity_ && lru_tail_)
        evict_lru();
    ++file->refs_; // the cache's own reference
    file->cached_ = true;
    size_t bytes = file->identity.data.size() + file->gzip.data.size() + file->brotli.data.size() +
                   file->zstd.data.size();
    file->charged_ = bytes;
    memory_bytes_ += bytes;
    file->descriptors_ = descriptors_of(*file);
    size_t held = g_descriptors_held.fetch_add(file->descriptors_, std::memory_order_relaxed) +
                  file->descriptors_;
    map_.emplace(std::string_view(file->key), file);
    link_front(file);
    // Over the shared budget: this cache gives back its oldest (the new entry
    // stays; other caches give back theirs on their own misses, so the
    // excess is at most one entry per cache).
    while (held > descriptor_budget() && lru_tail_ != file) {
        evict_lru();
        held = descriptors_held();
    }
    return FileRef(file);
}

bool FileCache::shed_descriptors() {
    size_t held = descriptors_held();
    // The process ran out: whatever took the descriptors, the cache keeps
    // fewer from now on (never more than half of what it held when it happened).
    size_t budget = std::max(held / 2, kMinDescriptorBudget);
    if (budget < descriptor_budget()) set_descriptor_budget(budget);
    bool shed = false;
    while (lru_tail_ && (descriptors_held() > descriptor_budget() || !shed)) {
        evict_lru();
        shed = true;
    }
    return shed;
}

void FileCache::evict_lru() {
    remove(lru_tail_);
    ++evictions_;
}

void FileCache::remove(CachedFile* file) {
    map_.erase(std::string_view(file->key));
    unlink(file);
    file->cached_ = false;
    memory_bytes_ -= file->charged_;
    g_descriptors_held.fetch_sub(file->descriptors_, std::memory_order_relaxed);
    file->descriptors_ = 0;
    // Give up the cache's reference; FileRefs still held keep the entry alive.
    if (--file->refs_ == 0) delete file;
}

void FileCache::link_front(CachedFile* file) {
    file->lru_prev_ = nullptr;
    file->lru_next_ = lru_head_;
    if (lru_head_) lru_head_->lru_prev_ = file;
    lru_head_ = file;
    if (!lru_tail_) lru_tail_ = file;
}

void FileCache::unlink(CachedFile* file) {
    if (file->lru_prev_)
        file->lru_prev_->lru_next_ = file->lru_next_;
    else if (lru_head_ == file)
        lru_head_ = file->lru_next_;
    if (file->lru_next_)
        file->lru_next_->lru_prev_ = file->lru_prev_;
    else if (lru_tail_ == file)
        lru_tail_ = file->lru_prev_;
    file->lru_prev_ = file->lru_next_ = nullptr;
}

} // namespace lepus
