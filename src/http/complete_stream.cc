#include "http/complete_stream.h"

#include "log/error_log.h"

#include <cerrno>
#include <unistd.h>

namespace lepus {
namespace {

constexpr size_t kChunkSize = size_t(64) * 1024;

} // namespace

CompleteStream::CompleteStream(Response& response, bool head_only) {
    // The body may point into owned_body, whose bytes move with the string
    // (or not, when they are short enough to live inside it): keep its offset.
    const std::string& owned = response.owned_body;
    bool in_owned = !response.body.empty() && response.body.data() >= owned.data() &&
                    response.body.data() < owned.data() + owned.size();
    size_t owned_offset = in_owned ? size_t(response.body.data() - owned.data()) : 0;
    response_.head = std::move(response.head);
    response_.owned_body = std::move(response.owned_body);
    response_.body =
        in_owned ? std::string_view(response_.owned_body).substr(owned_offset, response.body.size())
                 : response.body;
    response_.file = std::move(response.file);
    response_.file_fd = response.file_fd;
    response_.file_offset = response.file_offset;
    response_.file_length = response.file_length;
    response.reset();

    head_.status = response_.head.status;
    head_.content_length = response_.head.content_length;
    // Views into response_.head, which no longer changes.
    response_.head.for_each([&](std::string_view name, std::string_view value) {
        headers_.push_back(Header{name, value});
    });
    head_.headers = headers_;
    if (!head_only) {
        memory_ = response_.body;
        if (response_.file_fd >= 0) {
            file_offset_ = response_.file_offset;
            file_left_ = response_.file_length;
        }
    }
    refill();
}

std::span<const char> CompleteStream::body() const {
    if (!memory_.empty()) return memory_;
    return {chunk_.data() + chunk_sent_, chunk_.size() - chunk_sent_};
}

void CompleteStream::consume(size_t bytes) {
    if (!memory_.empty()) {
        memory_.remove_prefix(std::min(bytes, memory_.size()));
    } else {
        chunk_sent_ = std::min(chunk_.size(), chunk_sent_ + bytes);
    }
    refill();
}

bool CompleteStream::ended() const {
    return !failed_ && memory_.empty() && chunk_sent_ == chunk_.size() && file_left_ == 0;
}

void CompleteStream::refill() {
    if (!memory_.empty() || chunk_sent_ < chunk_.size() || file_left_ == 0 || failed_) return;
    chunk_.resize(size_t(std::min<uint64_t>(file_left_, kChunkSize)));
    chunk_sent_ = 0;
    ssize_t n;
    do {
        n = ::pread(response_.file_fd, chunk_.data(), chunk_.size(), off_t(file_offset_));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        // The file shrank or cannot be read after its head was built.
        report_internal_error("reading a file for a delayed response", "", n < 0 ? errno : EIO);
        chunk_.clear();
        failed_ = true;
        return;
    }
    chunk_.resize(size_t(n));
    file_offset_ += uint64_t(n);
    file_left_ -= uint64_t(n);
}

} // namespace lepus
