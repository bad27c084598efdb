// BufferedBodyStream: takes a request's whole body before its backend stream
// exists, as nginx's fastcgi_request_buffering / proxy_request_buffering on.
// A client that sends its body slowly (one byte every 20 s) then holds only
// its own connection, not a php-fpm child or a backend connection: FastCGI
// and proxy streams take a pool connection when they are made (issue 32).
//
//   offer_body -> into memory up to `memory_limit` bytes, then all of it into
//                 an unnamed temporary file (O_TMPFILE in `temp_dir`: nothing
//                 to clean up after a crash); every byte is taken at once, so
//                 the engine's body timeout applies to the client alone
//   end_body   -> the inner stream is made (open()) and the body replayed
//                 into it with its back-pressure, then its end_body()
//   poll       -> Pending until then; afterwards the inner stream's state
//
// Memory and disk are bounded by the engines' --max-body-size (413 first).
// Engine-independent: the router decides which streams it wraps.
#pragma once

#include "base/unique_fd.h"
#include "http/forwarding_stream.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lepus {

struct BodyBufferOptions {
    size_t memory_limit = size_t{64} * 1024; // --client-body-buffer
    std::string temp_dir = "/tmp";           // --temp-dir
};

class BufferedBodyStream final : public ForwardingStream {
public:
    // Makes the backend stream once the body is complete (called once, from end_body).
    using Open = std::function<std::unique_ptr<ResponseStream>()>;

    // `options` must outlive the stream (the server's, kept by the exchange).
    BufferedBodyStream(Open open, const BodyBufferOptions& options)
        : open_(std::move(open)), options_(options) {}
    ~BufferedBodyStream() override;

    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    StreamState poll() override;
    void release() override;

    // Bytes read back from the file per offer to the inner stream.
    static constexpr size_t kReplayChunk = size_t{64} * 1024;

private:
    bool spill(std::span<const char> data); // false: the file could not be written
    void replay();                          // offers what the inner stream takes

    Open open_;
    const BodyBufferOptions& options_;
    // inner_ (ForwardingStream's) is null until end_body().
    // The body so far while it fits in memory; while replaying from the file,
    // the chunk read back and not yet taken (from memory_pos_).
    std::string memory_;
    size_t memory_pos_ = 0;
    UniqueFd file_; // the body, once it outgrew memory_limit
    uint64_t file_size_ = 0;
    uint64_t file_read_ = 0;  // replayed up to here
    bool failed_ = false;     // the temporary file failed: 500 (once the body is in)
    bool ended_ = false;      // end_body() was called
    bool replayed_ = false;   // the inner stream has the whole body and its end
    bool seen_ready_ = false; // poll() said Ready: a failure now is Broken
    bool released_ = false;
};

// An unnamed file in `dir` for a request body (O_TMPFILE, or a name unlinked
// at once where the file system has no O_TMPFILE); invalid with errno set.
UniqueFd open_body_temp_file(const std::string& dir);

} // namespace lepus
