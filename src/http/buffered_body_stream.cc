#include "http/buffered_body_stream.h"

#include "log/error_log.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace lepus {

BufferedBodyStream::~BufferedBodyStream() {
    release();
    // Before open_: the inner stream may point into what open_ captured (the
    // FastCGI script target).
    inner_.reset();
}

size_t BufferedBodyStream::offer_body(std::span<const char> data) {
    // Everything is taken, even after a failure (poll() reports it): the
    // client, not a backend, is who the engine waits for while it sends.
    if (failed_ || data.empty()) return data.size();
    if (!file_ && memory_.size() + data.size() <= options_.memory_limit) {
        memory_.append(data.data(), data.size());
        return data.size();
    }
    if (!spill(data)) {
        failed_ = true;
        file_.reset();
    }
    return data.size();
}

// nginx's client_body_temp_path: past the memory buffer, the whole body goes
// to a file; written on the reactor thread, as nginx does (a page-cache write).
bool BufferedBodyStream::spill(std::span<const char> data) {
    if (!file_) {
        file_ = open_body_temp_file(options_.temp_dir);
        if (!file_) {
            log_error("cannot create a temporary file for a request body in %s: %s: 500",
                      options_.temp_dir.c_str(), std::strerror(errno));
            return false;
        }
        std::string held = std::move(memory_);
        std::string().swap(memory_);
        if (!spill(held)) return false;
    }
    while (!data.empty()) {
        ssize_t n = ::pwrite(file_.get(), data.data(), data.size(), off_t(file_size_));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            log_error("cannot write a request body to its temporary file in %s: %s: 500",
                      options_.temp_dir.c_str(), n < 0 ? std::strerror(errno) : "no space");
            return false;
        }
        file_size_ += uint64_t(n);
        data = data.subspan(size_t(n));
    }
    return true;
}

void BufferedBodyStream::end_body() {
    ended_ = true;
    if (failed_ || inner_) return;
    // Only now is a backend connection asked for: the body is all here.
    inner_ = open_();
}

StreamState BufferedBodyStream::poll() {
    // A file that failed mid-body is told once the body is in (and dropped):
    // the client gets its 500 and may keep its connection.
    if (failed_ && (ended_ || inner_))
        return seen_ready_ ? StreamState::Broken : StreamState::Failed;
    if (!inner_) return StreamState::Pending;
    // The inner stream sends its request head first (once it has a
    // connection), after which it can take the body.
    StreamState state = inner_->poll();
    if (!replayed_ && (state == StreamState::Pending || state == StreamState::Ready)) {
        replay();
        if (failed_) return seen_ready_ ? StreamState::Broken : StreamState::Failed;
        state = inner_->poll(); // sends what the replay gave
    }
    if (state == StreamState::Ready) seen_ready_ = true;
    return state;
}

// Offers the body to the inner stream until it is full (its progress brings
// the engine back to poll()) or has it all.
void BufferedBodyStream::replay() {
    for (;;) {
        if (memory_pos_ < memory_.size()) {
            std::span<const char> rest(memory_.data() + memory_pos_, memory_.size() - memory_pos_);
            memory_pos_ += inner_->offer_body(rest);
            if (memory_pos_ < memory_.size()) return;
            continue;
        }
        if (file_ && file_read_ < file_size_) {
            memory_.resize(size_t(std::min<uint64_t>(kReplayChunk, file_size_ - file_read_)));
            ssize_t n = ::pread(file_.get(), memory_.data(), memory_.size(), off_t(file_read_));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                log_error("cannot read a request body back from its temporary file: %s: 500",
                          n < 0 ? std::strerror(errno) : "the file is short");
                failed_ = true;
                return;
            }
            memory_.resize(size_t(n));
            memory_pos_ = 0;
            file_read_ += uint64_t(n);
            continue;
        }
        replayed_ = true;
        std::string().swap(memory_);
        file_.reset();
        inner_->end_body();
        return;
    }
}

void BufferedBodyStream::release() {
    if (released_) return;
    released_ = true;
    if (inner_) inner_->release();
    file_.reset();
    std::string().swap(memory_);
}

UniqueFd open_body_temp_file(const std::string& dir) {
    // O_TMPFILE: a file with no name, gone with its last descriptor.
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return UniqueFd(fd);
    // A file system without O_TMPFILE (EISDIR on kernels before 3.11): a
    // unique name, unlinked at once.
    std::string path = dir + "/lepus-body-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(path.c_str());
    return UniqueFd(fd);
}

} // namespace lepus
