// Internal header of the HTTP/2 engine: a response head (http/response_head.h)
// as an HTTP/2 header block. Not for other users.
#pragma once

#include "http/response_head.h"

#include <array>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::detail {

// Where a header block's lowercased names, date and digits are written: in
// place for a usual head (a static file's has 46 bytes of names), on the
// heap past that. No allocation, and no zero-filling, for most responses.
class HeadText {
public:
    // `size` bytes to write into; what an earlier call returned is gone.
    char* room(size_t size) {
        size_ = size;
        if (size <= inline_.size()) return inline_.data();
        if (heap_size_ < size) {
            heap_ = std::make_unique_for_overwrite<char[]>(size);
            heap_size_ = size;
        }
        return heap_.get();
    }
    const char* data() const { return size_ <= inline_.size() ? inline_.data() : heap_.get(); }
    size_t size() const { return size_; }
    // Heap bytes held (the stream's memory bound counts them).
    size_t capacity() const { return heap_size_; }

private:
    std::array<char, 160> inline_;
    size_t size_ = 0;
    std::unique_ptr<char[]> heap_;
    size_t heap_size_ = 0;
};

// One field of a response's header block, pointing into the head and its
// HeadText: the HTTP/2 engine encodes it with HPACK, the HTTP/3 engine hands
// it to nghttp3 (whose nghttp3_nv has the same first four members).
struct HeadField {
    uint8_t* name;
    uint8_t* value;
    size_t namelen;
    size_t valuelen;
    std::string_view name_view() const { return {reinterpret_cast<const char*>(name), namelen}; }
    std::string_view value_view() const { return {reinterpret_cast<const char*>(value), valuelen}; }
};

// `head` as an HTTP/2 header block in `fields`: ":status" first, then date and
// server, the head's fields with their names lowercased (RFC 9113 §8.2.1)
// and connection fields dropped (§8.2.2), then content-length. Values point
// into `head`; names, the date and digits into `text`: both must stay as they
// are while the fields are read.
void head_to_fields(const ResponseHead& head, time_t now, HeadText& text,
                    std::vector<HeadField>& fields);

} // namespace lepus::detail
