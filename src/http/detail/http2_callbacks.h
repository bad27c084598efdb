// Internal header of the HTTP/2 engine: nghttp2's callbacks into it, a friend
// of Http2Engine (user_data is the engine). Not for other users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nghttp2/nghttp2.h>
#include <string_view>
#include <sys/types.h>

namespace lepus {

class Http2Engine;
class Http2Output;
struct Http2Stream;
struct Response;

struct Http2Callbacks {
    // Every callback below that nghttp2 calls on a session, set on `callbacks`.
    static void install(nghttp2_session_callbacks* callbacks);

    // DATA for a response (the read_callback of its nghttp2_data_provider):
    // from the complete Response's memory and file, or from the response
    // stream as the backend delivers.
    static ssize_t read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buffer,
                             size_t length, uint32_t* flags, nghttp2_data_source* source,
                             void* user_data);

private:
    static Http2Engine& engine(void* user_data);
    static Http2Stream* find(Http2Engine& self, int32_t id);

    static int on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd,
                              void* user_data);
    static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                void* user_data);
    static int on_header(nghttp2_session* session, const nghttp2_frame* frame,
                         const uint8_t* name_bytes, size_t name_length, const uint8_t* value_bytes,
                         size_t value_length, uint8_t flags, void* user_data);
    static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
    static int on_data_chunk_recv(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                                  const uint8_t* data, size_t length, void* user_data);
    static int on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                               void* user_data);
    static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
    static int on_invalid_frame_recv(nghttp2_session* session, const nghttp2_frame* frame,
                                     int lib_error_code, void* user_data);
    static int send_data(nghttp2_session* session, nghttp2_frame* frame, const uint8_t* header,
                         size_t length, nghttp2_data_source* source, void* user_data);
    static void send_memory_data(Http2Output& output, std::string_view header,
                                 const Response& response, std::string_view payload);
    static int send_file_data(Http2Engine& self, std::string_view header, const Response& response,
                              uint64_t file_at, size_t length);
};

} // namespace lepus
