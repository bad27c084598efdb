// The HPACK encoder (RFC 7541 §6), for a server's responses. Every field is
// written with one resize of the output to its largest size and a cut to what
// was written, so a block costs a few resizes and no allocation once the
// caller's buffer has grown.
#include "http/detail/hpack_huffman.h"
#include "http/hpack.h"

#include <algorithm>
#include <cstring>

namespace lepus {

namespace {

// Largest encoding of an integer below 2^32 with any prefix (§5.1): the prefix
// byte and five continuation bytes.
constexpr size_t kMaxIntegerBytes = 6;

// Writes `value` with an N-bit prefix after the bits `first` already holds (§5.1).
uint8_t* write_integer(uint8_t* at, uint8_t first, unsigned prefix_bits, size_t value) {
    const size_t prefix_max = (size_t{1} << prefix_bits) - 1;
    if (value < prefix_max) {
        *at++ = static_cast<uint8_t>(first | value);
        return at;
    }
    *at++ = static_cast<uint8_t>(first | prefix_max);
    value -= prefix_max;
    for (; value >= 0x80; value >>= 7)
        *at++ = static_cast<uint8_t>(0x80 | (value & 0x7f));
    *at++ = static_cast<uint8_t>(value);
    return at;
}

// Writes a string literal (§5.2), Huffman-coded when allowed and shorter.
uint8_t* write_string(uint8_t* at, std::string_view text, bool huffman_allowed) {
    if (huffman_allowed) {
        const size_t coded = detail::huffman_encoded_size(text);
        if (coded < text.size())
            return detail::huffman_encode(text, write_integer(at, 0x80, 7, coded));
    }
    at = write_integer(at, 0, 7, text.size());
    if (!text.empty()) std::memcpy(at, text.data(), text.size());
    return at + text.size();
}

// Grows `out` by `most` bytes and returns where they start; finish() cuts it back.
uint8_t* room(std::string& out, size_t most) {
    const size_t used = out.size();
    out.resize(used + most);
    return reinterpret_cast<uint8_t*>(out.data() + used);
}

void finish(std::string& out, const uint8_t* end) {
    out.resize(static_cast<size_t>(reinterpret_cast<const char*>(end) - out.data()));
}

// Writes at most `most` bytes with `write(at)` (which returns its end) onto
// `out`: a usual field goes through a buffer on the stack, so that `out` is
// not zero-filled first (resize) only to be written over.
template <class Write> void emit(std::string& out, size_t most, Write write) {
    constexpr size_t kOnStack = 256;
    if (most <= kOnStack) {
        uint8_t buffer[kOnStack];
        const uint8_t* end = write(buffer);
        out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(end - buffer));
        return;
    }
    finish(out, write(room(out, most)));
}

} // namespace

HpackEncoder::HpackEncoder(uint32_t max_table_size)
    : own_max_table_size_(max_table_size),
      table_(std::min(max_table_size, kHpackDefaultTableSize)) {
    // The peer's decoder starts at the default size: a smaller table is announced.
    if (table_.max_size() < kHpackDefaultTableSize) {
        size_update_pending_ = true;
        smallest_pending_size_ = table_.max_size();
    }
}

void HpackEncoder::set_peer_max_table_size(uint32_t peer_max_table_size) {
    const uint32_t size = std::min(own_max_table_size_, peer_max_table_size);
    if (size == table_.max_size() && !size_update_pending_) return;
    smallest_pending_size_ = size_update_pending_ ? std::min(smallest_pending_size_, size) : size;
    size_update_pending_ = true;
    table_.set_max_size(size);
    state_id_ = next_state_id();
}

void HpackEncoder::forget_table() {
    if (table_.count() == 0) return;
    table_ = detail::HpackDynamicTable(table_.max_size());
    state_id_ = next_state_id();
}

void HpackEncoder::begin_block(std::string& out) {
    if (!size_update_pending_) return;
    size_update_pending_ = false;
    uint8_t* at = room(out, 2 * kMaxIntegerBytes);
    // §4.2: when the size went down and up again, the smallest is signalled first
    // so the peer evicts what we evicted.
    if (smallest_pending_size_ < table_.max_size())
        at = write_integer(at, 0x20, 5, smallest_pending_size_);
    at = write_integer(at, 0x20, 5, table_.max_size());
    finish(out, at);
}

void HpackEncoder::encode_status(unsigned status, std::string& out) {
    uint8_t index = 0;
    switch (status) {
    case 200:
        index = 8;
        break;
    case 204:
        index = 9;
        break;
    case 206:
        index = 10;
        break;
    case 304:
        index = 11;
        break;
    case 400:
        index = 12;
        break;
    case 404:
        index = 13;
        break;
    case 500:
        index = 14;
        break;
    default:
        break;
    }
    if (index != 0) {
        out.push_back(static_cast<char>(0x80 | index)); // §6.1
        return;
    }
    // Three digits, without indexing, name by index 8 (§6.2.2): each status
    // other than the seven above is rare on one connection.
    const char digits[3] = {static_cast<char>('0' + status / 100 % 10),
                            static_cast<char>('0' + status / 10 % 10),
                            static_cast<char>('0' + status % 10)};
    uint8_t* at = room(out, 5);
    *at++ = 0x08;
    *at++ = 3;
    std::memcpy(at, digits, 3);
    finish(out, at + 3);
}

size_t HpackEncoder::find(std::string_view name, uint8_t static_name, std::string_view value,
                          size_t& name_index) const {
    for (size_t i = 0; i < table_.count(); ++i) {
        detail::HpackDynamicTable::Entry entry = table_.get(i);
        // Every entry with a static table name was inserted with its index.
        if (static_name != 0 ? entry.static_name_index != static_name : entry.name != name)
            continue;
        const size_t index = detail::kHpackStaticEntries + 1 + i;
        if (entry.value == value) return index;
        if (name_index == 0) name_index = index;
    }
    return 0;
}

void HpackEncoder::encode(std::string_view name, std::string_view value, HpackIndexing indexing,
                          std::string& out) {
    encode_known(detail::hpack_static_name_index(name), name, value, indexing, out);
}

void HpackEncoder::encode_known(uint8_t static_name, std::string_view name, std::string_view value,
                                HpackIndexing indexing, std::string& out) {
    size_t name_index = static_name;
    if (indexing == HpackIndexing::Incremental) {
        if (size_t index = detail::hpack_static_field_index(static_name, value); index != 0) {
            out.push_back(static_cast<char>(0x80 | index));
            return;
        }
        if (size_t index = find(name, static_name, value, name_index); index != 0) {
            emit(out, kMaxIntegerBytes,
                 [&](uint8_t* at) { return write_integer(at, 0x80, 7, index); }); // §6.1
            return;
        }
    }
    // A name is sent once per connection when it is indexed: worth its coding.
    const bool huffman_value = indexing == HpackIndexing::Incremental || huffman_for_literals_;
    emit(out, 3 * kMaxIntegerBytes + (name_index != 0 ? 0 : name.size()) + value.size(),
         [&](uint8_t* at) {
             // §6.2.1: 01 and a 6-bit index; §6.2.2: 0000 and §6.2.3: 0001, a 4-bit index.
             switch (indexing) {
             case HpackIndexing::Incremental:
                 at = write_integer(at, 0x40, 6, name_index);
                 break;
             case HpackIndexing::WithoutIndexing:
                 at = write_integer(at, 0x00, 4, name_index);
                 break;
             case HpackIndexing::NeverIndexed:
                 at = write_integer(at, 0x10, 4, name_index);
                 break;
             }
             if (name_index == 0)
                 at = write_string(at, name, indexing == HpackIndexing::Incremental);
             return write_string(at, value, huffman_value);
         });
    if (indexing == HpackIndexing::Incremental) {
        table_.insert(name, value, static_name);
        state_id_ = next_state_id();
    }
}

} // namespace lepus
