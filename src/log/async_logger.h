// AsyncLogger: double-buffered asynchronous log target (the shape of muduo's AsyncLogging).
//
// Front-end threads (reactors) copy complete lines into the current in-memory buffer under a
// mutex held only for a memcpy; they never wait on the disk. A back-end thread takes the
// filled buffers when one fills up or every flush interval and writes them with writev().
// When the back-end falls more than `max_queued_buffers` behind, the newest buffer is
// dropped whole instead of blocking: the lines are counted and one "dropped N lines" line
// is written in their place. Memory stays bounded by about
// (2 * max_queued_buffers + 6) * buffer_size: the queue, the batch being written, the
// current buffer and a few spares.
#pragma once

#include "base/unique_fd.h"
#include "log/log_file.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace lepus {

struct AsyncLoggerOptions {
    std::string path;                  // a file, "-" for stderr, "off" to disable logging
    size_t buffer_size = 4u << 20;     // bytes per buffer; longer lines get a buffer of their own
    size_t max_queued_buffers = 16;    // full buffers waiting for the back-end before dropping
    uint32_t flush_interval_ms = 1000; // a partly filled buffer is written at least this often
};

class AsyncLogger {
public:
    explicit AsyncLogger(AsyncLoggerOptions options);
    // Calls stop(): every line appended before it is written.
    ~AsyncLogger();
    AsyncLogger(const AsyncLogger&) = delete;
    AsyncLogger& operator=(const AsyncLogger&) = delete;

    // Opens the target and starts the back-end thread; on failure returns false and sets
    // `error` to one printable sentence. A disabled ("off") logger starts trivially.
    bool start(std::string& error);

    // Queues one or more complete lines, each ending in '\n'; thread-safe, never blocks on
    // I/O. Lines appended while the logger is not running are counted as dropped.
    void append(std::string_view lines) {
        if (enabled_) append_enabled(lines);
    }

    // Asks the back-end to re-open the file by path (logrotate: the server calls this on
    // SIGUSR1). Lines appended before the call go to the old file, later ones to the new
    // file. Thread-safe but not async-signal-safe. No-op for stderr and "off".
    void reopen();

    // Writes everything appended so far, joins the back-end and closes the file; idempotent.
    void stop();

    // False for "off": append() is then a single branch.
    bool enabled() const { return enabled_; }

    // Lines discarded because the back-end fell behind, a write failed or the logger was
    // not running.
    uint64_t dropped_lines() const { return dropped_lines_.load(std::memory_order_relaxed); }

    // Appended lines the back-end has written to the target (the drop notices not included).
    uint64_t written_lines() const { return written_lines_.load(std::memory_order_relaxed); }

    // The configured path ("-" and "off" included).
    const std::string& path() const { return options_.path; }

private:
    struct Buffer;
    using BufferPtr = std::unique_ptr<Buffer>;

    void append_enabled(std::string_view lines);
    void append_oversized_locked(std::string_view lines, uint64_t line_count);
    void queue_current_locked();
    void drop_locked(uint64_t line_count);
    BufferPtr take_spare_locked();

    void run_backend();
    void write_batch(std::vector<BufferPtr>& batch);
    bool write_buffers(const std::vector<BufferPtr>& batch, size_t begin, size_t end);
    void write_drop_notice(uint64_t line_count);
    void reopen_file();

    const AsyncLoggerOptions options_;
    const bool enabled_;
    const bool to_stderr_;

    std::mutex mutex_; // guards everything down to pending_drop_notice_
    std::condition_variable backend_wakeup_;
    BufferPtr current_;             // the buffer front-ends append to
    std::vector<BufferPtr> queued_; // full buffers in order, waiting for the back-end
    std::vector<BufferPtr> spare_;  // written buffers kept for reuse
    bool running_ = false;
    uint64_t pending_drop_notice_ = 0; // dropped lines not yet announced in the log

    std::atomic<uint64_t> dropped_lines_{0};
    std::atomic<uint64_t> written_lines_{0};

    // Owned by the back-end thread between start() and stop().
    UniqueFd fd_;
    bool write_failing_ = false;

    std::mutex lifecycle_mutex_; // serialises start() and stop()
    std::thread backend_;
};

} // namespace lepus
