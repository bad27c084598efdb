// Response: what the connection writes for one request — a head (a
// ResponseHead: status and fields, which the engine writes in its own
// format), an optional in-memory body, and an optional file range for
// sendfile — plus the builders shared by every handler (status reasons,
// common headers, error pages).
#pragma once

#include "http/file_cache.h"
#include "http/request.h"
#include "http/response_head.h"

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace lepus {

struct Response {
    ResponseHead head;        // head.status is the response's status
    std::string_view body;    // sent right after head; empty for HEAD
    std::string owned_body;   // storage for generated bodies (body points into it)
    FileRef file;             // keeps a cached file (fd and memory) alive until sent
    int file_fd = -1;         // when >= 0: after head and body, sendfile file_length
    uint64_t file_offset = 0; // bytes from file_offset (pass an offset pointer:
    uint64_t file_length = 0; // the fd is shared, its file position is not used)
    // Where `body` came from when it is a cached file's bytes (-1 otherwise):
    // an engine whose transport sends files without a copy may send a large
    // body from the file instead of from memory.
    int body_file_fd = -1;
    uint64_t body_file_offset = 0;
    bool keep_alive = true; // false: close after this response (the engine says so)

    // What the access log reports: body.size() + file_length.
    uint64_t body_bytes() const { return body.size() + file_length; }
    // Back to the empty state, keeping the capacity of head and owned_body.
    void reset();
};

// What an answer depends on besides its status (the engine adds the date and
// the Connection field the client's version needs).
struct ReplyContext {
    bool keep_alive = true;
    bool head_request = false; // HEAD: the headers of GET, no body
};

// The reason phrase for `status` from the one status list ("Unknown" if absent).
std::string_view status_reason(int status);

// Headers every response carries: "Date: <IMF-fixdate>\r\nServer: lepus\r\n",
// formatted at most once per second per thread.
void append_common_headers(time_t now, std::string& head);

// Appends `value` in decimal (Content-Length, Content-Range).
void append_decimal(uint64_t value, std::string& out);

// Appends `value` in lower-case hexadecimal (chunk sizes).
void append_hex(uint64_t value, std::string& out);

// RFC 9110 §6.4.1: a response with `status` has no content (1xx, 204, 304).
inline bool status_has_no_body(int status) {
    return status < 200 || status == 204 || status == 304;
}

// No content is sent for this answer: the status says so, or the request was HEAD.
inline bool response_has_no_body(const Request& request, int status) {
    return request.is_head() || status_has_no_body(status);
}

// Clears out.head for an answer with `status`; records keep_alive in `out`
// (the engine writes Date, Server and Connection itself).
void begin_head(int status, bool keep_alive, Response& out);

// A complete response whose body is a small HTML page naming the status
// (none for HEAD, 1xx, 204 and 304). The caller may add fields afterwards
// (Allow, Location, Retry-After).
void build_error_response(int status, const ReplyContext& context, Response& out);

// Same, for the server's own errors (400 from the parser, 503 ...).
void build_error_response(int status, bool keep_alive, Response& out);

// The one place internal errors (those that become a 500) are reported.
void report_internal_error(std::string_view what, std::string_view path, int error_number);

} // namespace lepus
