#include "http/http2_output.h"

#include "net/transport.h"

#include <algorithm>
#include <cerrno>
#include <sys/uio.h>
#include <unistd.h>

namespace lepus {

void Http2Output::reserve_batch() {
    // One allocation for a usual batch (ten 612-byte responses under h2load
    // -m10 are 7 KiB), not a string grown by doubling from nothing after
    // every release().
    if (bytes_.capacity() < kBatchReserve) bytes_.reserve(kBatchReserve);
}

void Http2Output::append(std::string_view bytes) {
    if (bytes_.empty()) reserve_batch();
    bytes_.append(bytes);
    pending_ += bytes.size();
}

int Http2Output::append_file_copy(std::string_view header, int fd, uint64_t offset, size_t length) {
    if (bytes_.empty()) reserve_batch();
    size_t start = bytes_.size(); // nothing of it is written yet
    bytes_.append(header);
    bytes_.resize(start + header.size() + length);
    char* payload = bytes_.data() + start + header.size();
    for (size_t have = 0; have < length;) {
        ssize_t got = ::pread(fd, payload + have, length - have, off_t(offset + have));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int error = got < 0 ? errno : EIO; // 0: the file shrank under us
            bytes_.resize(start);              // the frame never was
            return error;
        }
        have += size_t(got);
    }
    pending_ += header.size() + length;
    return 0;
}

void Http2Output::append_file(std::string_view header, FileRef file, int fd, uint64_t offset,
                              size_t length) {
    append(header);
    // send_file() would read an empty segment as the end of the file.
    if (length > 0) add_segment({bytes_.size(), std::move(file), nullptr, fd, offset, length});
}

void Http2Output::append_memory(std::string_view header, FileRef file, const char* payload,
                                size_t length) {
    append(header);
    if (length > 0) add_segment({bytes_.size(), std::move(file), payload, -1, 0, length});
}

void Http2Output::add_segment(Segment segment) {
    if (segments_.capacity() == 0) segments_.reserve(8); // a 64 KiB batch of 16 KiB frames
    pending_ += segment.length;
    segments_.push_back(std::move(segment));
}

Http2Output::Status Http2Output::write(Transport& transport) {
    while (pending_ > 0) {
        if (!at_file_segment()) {
            iovec iov[kMaxIovecs];
            bool more = false;
            int count = gather(iov, more);
            ssize_t n = transport.writev(iov, count, more);
            if (n == kIoAgain) return Status::Again;
            if (n <= 0) return Status::Error;
            advance(uint64_t(n));
            continue;
        }
        const Segment& segment = segments_[next_segment_];
        ssize_t n = transport.send_file(segment.fd, segment.offset + segment_sent_,
                                        segment.length - segment_sent_);
        if (n == kIoAgain) return Status::Again;
        if (n == 0 || (n < 0 && !is_disconnect(errno))) {
            // The frame's length is promised: it can be neither finished nor
            // taken back. Frames stop here, and the connection with them.
            file_error_ = n == 0 ? EIO : errno;
            return Status::FileEnded; // the segment stays, for failed_path()
        }
        if (n < 0) return Status::Error;
        advance(uint64_t(n));
    }
    clear();
    return Status::Done;
}

bool Http2Output::at_file_segment() const {
    return next_segment_ < segments_.size() && sent_ == segments_[next_segment_].at &&
           segments_[next_segment_].payload == nullptr;
}

int Http2Output::gather(iovec* iov, bool& more) const {
    int count = 0;
    size_t at = sent_;
    uint64_t done = segment_sent_; // of the first segment only
    more = false;
    for (size_t index = next_segment_; count < kMaxIovecs;) {
        bool segment_next = index < segments_.size();
        size_t stop = segment_next ? segments_[index].at : bytes_.size();
        if (at < stop) {
            iov[count++] = {const_cast<char*>(bytes_.data() + at), stop - at};
            at = stop;
            continue;
        }
        if (!segment_next) break; // everything queued
        const Segment& segment = segments_[index];
        if (segment.payload == nullptr) {
            more = true; // its header waits for send_file's payload
            break;
        }
        iov[count++] = {const_cast<char*>(segment.payload + done), size_t(segment.length - done)};
        done = 0;
        ++index;
    }
    return count;
}

void Http2Output::advance(uint64_t n) {
    pending_ -= n;
    while (n > 0) {
        bool segment_next = next_segment_ < segments_.size();
        if (segment_next && sent_ == segments_[next_segment_].at) {
            Segment& segment = segments_[next_segment_];
            uint64_t take = std::min<uint64_t>(n, segment.length - segment_sent_);
            segment_sent_ += take;
            n -= take;
            if (segment_sent_ == segment.length) {
                // The file may close (or its cached contents go) now, not at
                // the end of the batch.
                segment.file.reset();
                ++next_segment_;
                segment_sent_ = 0;
            }
            continue;
        }
        size_t stop = segment_next ? segments_[next_segment_].at : bytes_.size();
        size_t take = size_t(std::min<uint64_t>(n, stop - sent_));
        sent_ += take;
        n -= take;
    }
}

std::string_view Http2Output::failed_path() const {
    if (next_segment_ >= segments_.size() || !segments_[next_segment_].file) return {};
    return segments_[next_segment_].file->rel_path;
}

void Http2Output::clear() {
    bytes_.clear();
    segments_.clear();
    sent_ = 0;
    next_segment_ = 0;
    segment_sent_ = 0;
    pending_ = 0;
}

void Http2Output::release() {
    clear();
    std::string().swap(bytes_);
    std::vector<Segment>().swap(segments_);
}

} // namespace lepus
