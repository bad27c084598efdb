#include "http/http2_output.h"

#include "net/transport.h"

#include <cerrno>
#include <sys/uio.h>
#include <unistd.h>

namespace lepus {

void Http2Output::append(std::string_view bytes) {
    bytes_.append(bytes);
    pending_ += bytes.size();
}

int Http2Output::append_file_copy(std::string_view header, int fd, uint64_t offset, size_t length) {
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
    if (length == 0) return; // send_file() would read that as the end of the file
    if (segments_.capacity() == 0) segments_.reserve(8); // a 64 KiB batch of 16 KiB frames
    segments_.push_back({bytes_.size(), std::move(file), fd, offset, length});
    pending_ += length;
}

Http2Output::Status Http2Output::write(Transport& transport) {
    while (pending_ > 0) {
        bool segment_next = next_segment_ < segments_.size();
        size_t stop = segment_next ? segments_[next_segment_].at : bytes_.size();
        if (sent_ < stop) {
            iovec iov{bytes_.data() + sent_, stop - sent_};
            ssize_t n = transport.writev(&iov, 1, segment_next);
            if (n == kIoAgain) return Status::Again;
            if (n <= 0) return Status::Error;
            sent_ += size_t(n);
            pending_ -= uint64_t(n);
            continue;
        }
        Segment& segment = segments_[next_segment_];
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
        segment_sent_ += uint64_t(n);
        pending_ -= uint64_t(n);
        if (segment_sent_ == segment.length) {
            segment.file.reset(); // the file may close now, not at the end of the batch
            ++next_segment_;
            segment_sent_ = 0;
        }
    }
    clear();
    return Status::Done;
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
