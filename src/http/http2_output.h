// Http2Output: what an HTTP/2 connection has produced and not yet written, in
// order: control frames and HEADERS, and the DATA frames of response bodies. A file
// frame's payload is either copied in after its header (pread, for TLS) or left
// in the file as a segment that write() hands to Transport::send_file (sendfile
// on plain TCP, no copy through user memory), as nginx's
// ngx_linux_sendfile_chain walks a chain of memory and file buffers. A payload
// already in memory (a small file the cache holds whole) is left where it is as
// a memory segment: write() gathers it with the bytes around it into one
// Transport::writev, so a batch of frames is one system call and the payload's
// only copy is the kernel's (or the cipher's, on TLS).
//
// Lifetime: the engine closes a stream as soon as it has produced the
// stream's last frame, before it is written; the stream's
// Response, and with it the FileRef that keeps the file open, may then be gone,
// and a client's RST_STREAM does the same at any time. A frame whose header is
// queued must still be finished (its length is promised), so each segment holds
// its own FileRef: the fd stays open (and the cached contents a memory segment
// points into stay alive) until the segment is sent or dropped.
// (A FileRef copy is a counter increment on this thread, cheaper than a dup.)
#pragma once

#include "http/file_cache.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/uio.h>
#include <vector>

namespace lepus {

class Transport;

class Http2Output {
public:
    // What write() ended on.
    enum class Status {
        Done,      // everything queued is written; the queue is empty
        Again,     // the transport would block: call again on the next edge
        Error,     // the transport failed (errno says why)
        FileEnded, // a file ended or failed before its segment was sent (file_error())
    };

    // Appends bytes as they are (frames serialized).
    void append(std::string_view bytes);
    // Appends a DATA frame: `header`, then `length` bytes of `fd` from `offset`
    // read now with pread. 0, or the errno value that stopped the read (EIO:
    // the file ended early); then nothing was appended.
    int append_file_copy(std::string_view header, int fd, uint64_t offset, size_t length);
    // Appends the same frame with its payload left in the file until write()
    // sends it with Transport::send_file. `file` owns `fd` and keeps it open
    // until then, whatever becomes of the stream.
    void append_file(std::string_view header, FileRef file, int fd, uint64_t offset, size_t length);
    // Appends a DATA frame: `header`, then the `length` bytes at `payload`,
    // left where they are until write() sends them. `file` owns that memory
    // (the contents of a cached file) and keeps it alive until then.
    void append_memory(std::string_view header, FileRef file, const char* payload, size_t length);

    // Bytes queued and not yet written, payloads of segments included.
    uint64_t pending() const { return pending_; }
    bool empty() const { return pending_ == 0; }

    // Writes what is queued, in order, until it is all out or the transport
    // stops: bytes and memory segments gathered into one writev (up to
    // kMaxIovecs pieces), file segments with send_file. The bytes before a file
    // segment go with MSG_MORE, so that a frame header and its payload leave in
    // the same TCP segment. After FileEnded the frames cannot be completed: the
    // connection must close.
    Status write(Transport& transport);
    // After FileEnded: the errno value (EIO for a file that shrank) and the
    // file's path relative to the root, for the error log.
    int file_error() const { return file_error_; }
    std::string_view failed_path() const;

    // Drops what is queued (the connection closes), releasing the files.
    void clear();
    // Drops what is queued and gives the storage back: an idle connection
    // keeps none.
    void release();

    // The bytes queued in memory (segment payloads aside), for tests.
    std::string_view bytes() const { return bytes_; }
    // The number of segments queued, for tests.
    size_t segments() const { return segments_.size() - next_segment_; }

    // The pieces one writev gathers at most: 64 covers a 64 KiB batch of
    // 16 KiB frames many times over, far below IOV_MAX (1024).
    static constexpr int kMaxIovecs = 64;

private:
    // A DATA frame's payload not in bytes_: it belongs at bytes_[at]. In
    // memory at `payload` when that is set, else in the file `fd` at `offset`.
    struct Segment {
        size_t at = 0;
        FileRef file;
        const char* payload = nullptr;
        int fd = -1;
        uint64_t offset = 0;
        size_t length = 0;
    };

    // What bytes_ reserves when the first bytes of a batch come (release()
    // gives it back when the connection is idle).
    static constexpr size_t kBatchReserve = size_t{16} * 1024;
    void reserve_batch();
    void add_segment(Segment segment);
    // True when the next thing to write is the payload of a file segment.
    bool at_file_segment() const;
    // Fills `iov` with what is queued from the write position up to the next
    // file segment (or kMaxIovecs pieces); `more`: a file segment follows.
    int gather(iovec* iov, bool& more) const;
    // Moves the write position `n` bytes on, releasing each segment passed.
    void advance(uint64_t n);

    std::string bytes_;
    size_t sent_ = 0; // of bytes_
    std::vector<Segment> segments_;
    size_t next_segment_ = 0;   // the first not fully sent
    uint64_t segment_sent_ = 0; // of segments_[next_segment_]
    uint64_t pending_ = 0;
    int file_error_ = 0;
};

} // namespace lepus
