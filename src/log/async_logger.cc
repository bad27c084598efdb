#include "log/async_logger.h"

#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/uio.h>
#include <system_error>
#include <unistd.h>

namespace lepus {

namespace {

constexpr std::string_view kStderrPath = "-";
constexpr std::string_view kOffPath = "off";
// Written buffers kept for reuse; more would pin memory after a burst for nothing.
constexpr size_t kMaxSpareBuffers = 4;
// A buffer smaller than one typical line would only churn.
constexpr size_t kMinBufferSize = 256;

// memchr() is vectorised where std::count() compiles to a byte loop, and a typical append
// holds one line, so this is one memchr() over the line.
uint64_t count_lines(std::string_view lines) {
    uint64_t count = 0;
    const char* rest = lines.data();
    const char* const end = rest + lines.size();
    while (const void* newline = std::memchr(rest, '\n', size_t(end - rest))) {
        ++count;
        rest = static_cast<const char*>(newline) + 1;
    }
    return count;
}

// Writes all of iov[0..count) to fd. Partial writes are resumed; EINTR retried; EAGAIN (a
// stderr someone made non-blocking) waits in poll(). Returns 0 or the errno that stopped it.
int write_fully(int fd, iovec* iov, int count) {
    while (count > 0) {
        ssize_t n = ::writev(fd, iov, std::min(count, IOV_MAX));
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                pollfd pfd{fd, POLLOUT, 0};
                ::poll(&pfd, 1, -1);
                continue;
            }
            return errno;
        }
        if (n == 0) return EIO; // no progress on a non-empty write: never spin on it
        auto written = size_t(n);
        while (count > 0 && written >= iov->iov_len) {
            written -= iov->iov_len;
            ++iov;
            --count;
        }
        if (count > 0) {
            iov->iov_base = static_cast<char*>(iov->iov_base) + written;
            iov->iov_len -= written;
        }
    }
    return 0;
}

// The logger cannot report its own failures through itself (they are about its target),
// so they go straight to stderr in one write.
void report_to_stderr(const std::string& message) {
    std::string line;
    append_error_line(LogLevel::Error, message, line);
    iovec iov{line.data(), line.size()};
    write_fully(STDERR_FILENO, &iov, 1);
}

std::string describe_errno(const std::string& what, const std::string& path, int error) {
    return what + " \"" + path + "\" failed (" + std::to_string(error) + ": " +
           std::strerror(error) + ")";
}

} // namespace

struct AsyncLogger::Buffer {
    explicit Buffer(size_t capacity)
        : data(std::make_unique_for_overwrite<char[]>(capacity)), capacity(capacity) {}

    size_t available() const { return capacity - size; }
    void clear() {
        size = 0;
        lines = 0;
        reopen_after = false;
    }

    std::unique_ptr<char[]> data;
    size_t capacity;
    size_t size = 0;
    uint64_t lines = 0;
    // Set by reopen(): the back-end re-opens the file right after writing this buffer.
    bool reopen_after = false;
};

AsyncLogger::AsyncLogger(AsyncLoggerOptions options)
    : options_([&] {
          options.buffer_size = std::max(options.buffer_size, kMinBufferSize);
          options.max_queued_buffers = std::max<size_t>(options.max_queued_buffers, 1);
          options.flush_interval_ms = std::max<uint32_t>(options.flush_interval_ms, 1);
          return std::move(options);
      }()),
      enabled_(options_.path != kOffPath), to_stderr_(options_.path == kStderrPath) {}

AsyncLogger::~AsyncLogger() {
    stop();
}

bool AsyncLogger::start(std::string& error) {
    std::lock_guard lifecycle(lifecycle_mutex_);
    if (!enabled_) return true;
    if (backend_.joinable()) {
        error = "log \"" + options_.path + "\" is already started";
        return false;
    }
    if (options_.path.empty()) {
        error = "log path is empty";
        return false;
    }
    // stderr is duplicated so that the logger owns its descriptor like a file's.
    int open_error = 0;
    UniqueFd fd = to_stderr_ ? UniqueFd(::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0))
                             : open_log_file(options_.path, open_error);
    if (!fd) {
        error = describe_errno(to_stderr_ ? "dup(stderr) for log" : "open() log file",
                               options_.path, to_stderr_ ? errno : open_error);
        return false;
    }
    fd_ = std::move(fd);
    write_failing_ = false;
    {
        std::lock_guard lock(mutex_);
        current_ = std::make_unique<Buffer>(options_.buffer_size);
        if (spare_.empty()) spare_.push_back(std::make_unique<Buffer>(options_.buffer_size));
        running_ = true;
    }
    try {
        backend_ = std::thread(&AsyncLogger::run_backend, this);
    } catch (const std::system_error& e) {
        std::lock_guard lock(mutex_);
        running_ = false;
        fd_.reset();
        error = std::string("cannot start the log thread: ") + e.what();
        return false;
    }
    pthread_setname_np(backend_.native_handle(), "lepus-log");
    return true;
}

void AsyncLogger::stop() {
    std::lock_guard lifecycle(lifecycle_mutex_);
    if (!backend_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        running_ = false;
    }
    backend_wakeup_.notify_one();
    backend_.join();
    fd_.reset();
}

void AsyncLogger::append_enabled(std::string_view lines) {
    if (lines.empty()) return;
    const uint64_t line_count = count_lines(lines); // outside the lock: the section stays a memcpy
    std::lock_guard lock(mutex_);
    if (!running_) {
        dropped_lines_.fetch_add(line_count, std::memory_order_relaxed);
        return;
    }
    if (current_->available() < lines.size()) {
        if (lines.size() > current_->capacity) {
            append_oversized_locked(lines, line_count);
            return;
        }
        queue_current_locked();
    }
    std::memcpy(current_->data.get() + current_->size, lines.data(), lines.size());
    current_->size += lines.size();
    current_->lines += line_count;
}

// A line longer than a whole buffer gets a buffer of its exact size, queued after the
// current one so that order is kept. Rare (a huge error message); it may allocate.
void AsyncLogger::append_oversized_locked(std::string_view lines, uint64_t line_count) {
    if (current_->size > 0) queue_current_locked();
    if (queued_.size() >= options_.max_queued_buffers) {
        drop_locked(line_count);
        return;
    }
    auto buffer = std::make_unique<Buffer>(lines.size());
    std::memcpy(buffer->data.get(), lines.data(), lines.size());
    buffer->size = lines.size();
    buffer->lines = line_count;
    queued_.push_back(std::move(buffer));
    backend_wakeup_.notify_one();
}

// Hands the current buffer to the back-end, or, when the back-end is already
// max_queued_buffers behind, discards its lines: the caller must never wait for the disk.
// Dropping the newest buffer keeps the queued ones (and any reopen mark) in order.
void AsyncLogger::queue_current_locked() {
    if (queued_.size() >= options_.max_queued_buffers) {
        drop_locked(current_->lines);
        current_->clear();
        return;
    }
    queued_.push_back(std::move(current_));
    current_ = take_spare_locked();
    backend_wakeup_.notify_one();
}

void AsyncLogger::drop_locked(uint64_t line_count) {
    dropped_lines_.fetch_add(line_count, std::memory_order_relaxed);
    pending_drop_notice_ += line_count;
}

AsyncLogger::BufferPtr AsyncLogger::take_spare_locked() {
    if (spare_.empty()) return std::make_unique<Buffer>(options_.buffer_size);
    BufferPtr buffer = std::move(spare_.back());
    spare_.pop_back();
    return buffer;
}

void AsyncLogger::reopen() {
    if (!enabled_ || to_stderr_) return;
    {
        std::lock_guard lock(mutex_);
        if (!running_) return;
        // The mark travels with the data: everything appended before it is written to the
        // old file. It is queued even past max_queued_buffers, so a reopen is never lost.
        current_->reopen_after = true;
        queued_.push_back(std::move(current_));
        current_ = take_spare_locked();
    }
    backend_wakeup_.notify_one();
}

void AsyncLogger::run_backend() {
    const auto interval = std::chrono::milliseconds(options_.flush_interval_ms);
    std::vector<BufferPtr> batch;
    bool stopping = false;
    while (!stopping) {
        uint64_t drop_notice = 0;
        {
            std::unique_lock lock(mutex_);
            if (queued_.empty() && running_) {
                backend_wakeup_.wait_for(lock, interval,
                                         [this] { return !queued_.empty() || !running_; });
            }
            // Once running_ is false append() refuses lines, so this batch is the last.
            stopping = !running_;
            if (current_->size > 0) {
                queued_.push_back(std::move(current_));
                current_ = take_spare_locked();
            }
            batch.swap(queued_);
            drop_notice = std::exchange(pending_drop_notice_, 0);
        }
        if (drop_notice > 0) write_drop_notice(drop_notice);
        write_batch(batch);
        {
            std::lock_guard lock(mutex_);
            for (BufferPtr& buffer : batch) {
                if (spare_.size() >= kMaxSpareBuffers || buffer->capacity != options_.buffer_size)
                    continue;
                buffer->clear();
                spare_.push_back(std::move(buffer));
            }
        }
        batch.clear(); // frees the buffers not kept (munmap), outside the lock
    }
}

// Writes the batch in runs that end at a reopen mark, so that each run goes to its file.
void AsyncLogger::write_batch(std::vector<BufferPtr>& batch) {
    size_t begin = 0;
    while (begin < batch.size()) {
        size_t end = begin;
        while (end < batch.size() && !batch[end]->reopen_after) {
            ++end;
        }
        const bool reopen_here = end < batch.size();
        if (reopen_here) ++end;
        uint64_t lines = 0;
        size_t bytes = 0;
        for (size_t i = begin; i < end; ++i) {
            lines += batch[i]->lines;
            bytes += batch[i]->size;
        }
        if (bytes > 0) {
            if (write_buffers(batch, begin, end)) {
                written_lines_.fetch_add(lines, std::memory_order_relaxed);
            } else {
                // Counted as dropped so that written + dropped == appended still holds;
                // the notice is attempted with the next batch.
                std::lock_guard lock(mutex_);
                drop_locked(lines);
            }
        }
        if (reopen_here) reopen_file();
        begin = end;
    }
}

bool AsyncLogger::write_buffers(const std::vector<BufferPtr>& batch, size_t begin, size_t end) {
    std::vector<iovec> iov;
    iov.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
        if (batch[i]->size > 0) iov.push_back({batch[i]->data.get(), batch[i]->size});
    }
    int error = write_fully(fd_.get(), iov.data(), int(iov.size()));
    if (error == 0) {
        write_failing_ = false;
        return true;
    }
    // One report per failure episode, not one per batch, so a full disk does not flood.
    if (!write_failing_) report_to_stderr(describe_errno("write() to log", options_.path, error));
    write_failing_ = true;
    return false;
}

void AsyncLogger::write_drop_notice(uint64_t line_count) {
    std::string line;
    append_error_line(LogLevel::Warn,
                      "log \"" + options_.path + "\" fell behind: dropped " +
                          std::to_string(line_count) + " lines",
                      line);
    iovec iov{line.data(), line.size()};
    write_fully(fd_.get(), &iov, 1);
}

void AsyncLogger::reopen_file() {
    // After the privilege drop, through the helper that kept root (log/log_file.h).
    int error = 0;
    UniqueFd fd = reopen_log_file(options_.path, error);
    if (!fd) {
        // Keep writing to the old file rather than losing lines.
        report_to_stderr(describe_errno("reopen() log file", options_.path, error));
        return;
    }
    fd_ = std::move(fd);
}

} // namespace lepus
