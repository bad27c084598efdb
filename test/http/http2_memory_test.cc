// Http2Memory, the allocator of the HTTP/2 engine's nghttp2 sessions: the
// frame buffer is allocated page-aligned and recognised, trim() gives its
// pages back without breaking the session (frames packed after it are
// whole), and a session's memory is all given back when it is deleted.
#include "http/detail/http2_memory.h"

#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <string>

namespace lepus::detail {
namespace {

// Everything the session has to send, as nghttp2_session_mem_send returns it.
std::string drain(nghttp2_session* session) {
    std::string out;
    for (;;) {
        const uint8_t* data = nullptr;
        ssize_t n = nghttp2_session_mem_send(session, &data);
        EXPECT_GE(n, 0);
        if (n <= 0) return out;
        out.append(reinterpret_cast<const char*>(data), size_t(n));
    }
}

nghttp2_session* new_session(Http2Memory& memory) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session* session = nullptr;
    EXPECT_EQ(nghttp2_session_server_new3(&session, callbacks, nullptr, nullptr, memory.mem()), 0);
    nghttp2_session_callbacks_del(callbacks);
    return session;
}

TEST(Http2Memory, TheFrameBufferIsRecognisedAndPageAligned) {
    Http2Memory memory;
    nghttp2_session* session = new_session(memory);
    EXPECT_GE(memory.frame_buffer_size(), Http2Memory::kFrameBufferAtLeast);
    EXPECT_EQ(memory.frame_buffer_size() % 4096, 0u);
    nghttp2_session_del(session);
    EXPECT_EQ(memory.frame_buffer_size(), 0u); // freed with the session
}

TEST(Http2Memory, FramesPackedAfterATrimAreWhole) {
    Http2Memory memory;
    nghttp2_session* session = new_session(memory);
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, 1);
    std::string first = drain(session);
    ASSERT_EQ(first.size(), 9u + 6u); // SETTINGS with one entry
    memory.trim();
    const uint8_t opaque[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, opaque);
    std::string ping = drain(session);
    ASSERT_EQ(ping.size(), 9u + 8u);
    EXPECT_EQ(ping[3], char(NGHTTP2_PING));
    EXPECT_EQ(ping.substr(9), std::string(reinterpret_cast<const char*>(opaque), 8));
    memory.trim();
    memory.trim(); // twice in a row: still the same buffer
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, 1);
    EXPECT_EQ(drain(session), first);
    nghttp2_session_del(session);
}

TEST(Http2Memory, SmallAndZeroedBlocksAreTheHeapsAndZero) {
    Http2Memory memory;
    nghttp2_mem* mem = memory.mem();
    void* small = mem->malloc(100, mem->mem_user_data);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(memory.frame_buffer_size(), 0u);
    auto* zeroed = static_cast<unsigned char*>(mem->calloc(2, 10000, mem->mem_user_data));
    ASSERT_NE(zeroed, nullptr);
    EXPECT_GE(memory.frame_buffer_size(), 20000u); // the first large block
    for (size_t i = 0; i < 20000; ++i)
        ASSERT_EQ(zeroed[i], 0) << i;
    void* second = mem->realloc(nullptr, 20000, mem->mem_user_data); // a second large block
    ASSERT_NE(second, nullptr);
    std::memset(second, 7, 20000);
    auto* grown = static_cast<unsigned char*>(mem->realloc(zeroed, 40000, mem->mem_user_data));
    ASSERT_NE(grown, nullptr);
    EXPECT_GE(memory.frame_buffer_size(), 40000u); // the frame buffer moved, still known
    EXPECT_EQ(grown[19999], 0);
    mem->free(second, mem->mem_user_data);
    mem->free(grown, mem->mem_user_data);
    EXPECT_EQ(memory.frame_buffer_size(), 0u);
    mem->free(small, mem->mem_user_data);
}

} // namespace
} // namespace lepus::detail
