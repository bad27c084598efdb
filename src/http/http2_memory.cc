#include "http/detail/http2_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace lepus::detail {

namespace {

constexpr size_t kPage = 4096;

} // namespace

Http2Memory::Http2Memory()
    : mem_{this, &Http2Memory::allocate, &Http2Memory::release, &Http2Memory::allocate_zeroed,
           &Http2Memory::reallocate} {}

void Http2Memory::trim() {
    // The block is page-aligned and a whole number of pages: every page is
    // the buffer's own. A failure only means the pages stay.
    if (frame_buffer_) ::madvise(frame_buffer_, frame_buffer_size_, MADV_DONTNEED);
}

void* Http2Memory::allocate_large(size_t size) {
    if (frame_buffer_) return std::malloc(size); // a second chunk: nghttp2 frees it after the frame
    size_t rounded = (size + kPage - 1) / kPage * kPage;
    void* block = std::aligned_alloc(kPage, rounded);
    if (block == nullptr) return nullptr;
    frame_buffer_ = block;
    frame_buffer_size_ = rounded;
    return block;
}

void* Http2Memory::allocate(size_t size, void* self) {
    if (size >= kFrameBufferAtLeast) return static_cast<Http2Memory*>(self)->allocate_large(size);
    return std::malloc(size);
}

void Http2Memory::release(void* block, void* self) {
    auto& memory = *static_cast<Http2Memory*>(self);
    if (block != nullptr && block == memory.frame_buffer_) {
        memory.frame_buffer_ = nullptr;
        memory.frame_buffer_size_ = 0;
    }
    std::free(block); // aligned_alloc's blocks too
}

void* Http2Memory::allocate_zeroed(size_t count, size_t size, void* self) {
    if (size == 0 || count > SIZE_MAX / size || count * size < kFrameBufferAtLeast)
        return std::calloc(count, size);
    void* block = allocate(count * size, self);
    return block ? std::memset(block, 0, count * size) : nullptr;
}

void* Http2Memory::reallocate(void* block, size_t size, void* self) {
    auto& memory = *static_cast<Http2Memory*>(self);
    // nghttp2_buf_reserve's first reserve of a buffer is realloc(NULL, size).
    if (block == nullptr) return allocate(size, self);
    if (block != memory.frame_buffer_) return std::realloc(block, size);
    // The frame buffer resized (nghttp2 does not do it today): a new block,
    // the bytes copied.
    size_t old_size = memory.frame_buffer_size_;
    memory.frame_buffer_ = nullptr;
    memory.frame_buffer_size_ = 0;
    void* moved = allocate(size, self);
    if (moved == nullptr) {
        memory.frame_buffer_ = block; // realloc's contract: the old block stays
        memory.frame_buffer_size_ = old_size;
        return nullptr;
    }
    std::memcpy(moved, block, std::min(size, old_size));
    std::free(block);
    return moved;
}

} // namespace lepus::detail
