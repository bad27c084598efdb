// Internal header of the HTTP/2 engine: the allocator of its nghttp2 session
// (nghttp2_mem, given to nghttp2_session_server_new3). Not for other users.
//
// nghttp2 allocates a 16 KiB outbound frame buffer when a session is created
// and keeps it for the session's life. Between two calls of
// nghttp2_session_mem_send its bytes are dead: each frame is packed anew, and
// the engine copies what mem_send returns at once. So while a connection is
// idle the buffer's pages can go back to the kernel (trim(), MADV_DONTNEED),
// and come back zeroed, page by page, when frames are packed again. For the
// pages to be the buffer's own, it is allocated page-aligned. Everything
// else goes to malloc as before.
#pragma once

#include <cstddef>
#include <nghttp2/nghttp2.h>

namespace lepus::detail {

class Http2Memory {
public:
    // The first block of at least this size is taken for the frame buffer
    // (NGHTTP2_FRAMEBUF_CHUNKLEN, 16,394 bytes; nghttp2 allocates nothing
    // else this large per session, its next largest is 4 KiB).
    static constexpr size_t kFrameBufferAtLeast = size_t{16} * 1024;

    Http2Memory();
    Http2Memory(const Http2Memory&) = delete;
    Http2Memory& operator=(const Http2Memory&) = delete;

    // For nghttp2_session_server_new3; valid as long as this object.
    nghttp2_mem* mem() { return &mem_; }
    // Gives the frame buffer's pages back to the kernel. Only between calls
    // of nghttp2_session_mem_send (never while its output is still to be
    // copied).
    void trim();
    // The frame buffer's size (0: none yet), for tests.
    size_t frame_buffer_size() const { return frame_buffer_size_; }

private:
    static void* allocate(size_t size, void* self);
    static void release(void* block, void* self);
    static void* allocate_zeroed(size_t count, size_t size, void* self);
    static void* reallocate(void* block, size_t size, void* self);
    void* allocate_large(size_t size);

    nghttp2_mem mem_;
    void* frame_buffer_ = nullptr;
    size_t frame_buffer_size_ = 0; // rounded up to whole pages
};

} // namespace lepus::detail
