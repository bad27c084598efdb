// The HPACK decoder (RFC 7541 §3, §6). It reads a whole header block at once:
// the frame layer joins HEADERS and CONTINUATION payloads first, so no state
// survives between calls except the dynamic table, and every read is checked
// against the block's end.
#include "http/detail/hpack_huffman.h"
#include "http/hpack.h"

#include <cstring>

namespace lepus {

namespace {

// nghttp2 refuses longer strings (NGHTTP2_HD_MAX_NV) and so do we: no header
// needs 64 KiB, and the differential test expects the same answers.
constexpr uint32_t kMaxStringLength = 65536;

// Reads an integer with an N-bit prefix (§5.1) at `at`, which is before `end`.
// Values above 2^32 - 1 and continuations past 32 bits of shift are refused,
// as nghttp2 does: no field of HPACK needs more, and a decoder must bound them.
bool read_integer(const uint8_t*& at, const uint8_t* end, unsigned prefix_bits, uint32_t& value) {
    const uint32_t prefix_max = (1u << prefix_bits) - 1;
    uint64_t result = *at++ & prefix_max;
    if (result < prefix_max) {
        value = static_cast<uint32_t>(result);
        return true;
    }
    for (unsigned shift = 0;; shift += 7) {
        if (at == end || shift >= 32) return false;
        const uint8_t byte = *at++;
        result += static_cast<uint64_t>(byte & 0x7f) << shift;
        if (result > UINT32_MAX) return false;
        if ((byte & 0x80) == 0) break;
    }
    value = static_cast<uint32_t>(result);
    return true;
}

} // namespace

void HpackDecoder::set_max_table_size(uint32_t max_table_size) {
    limits_.max_table_size = max_table_size;
    if (max_table_size < table_.max_size()) {
        table_.set_max_size(max_table_size);
        size_update_required_ = true;
    }
}

HpackStatus HpackDecoder::decode(std::span<const uint8_t> block, HpackHeaderList& out) {
    out.clear();
    const uint8_t* at = block.data();
    const uint8_t* const end = at + block.size();
    bool too_large = false;

    // Reads a string literal (§5.2) and appends it to out's text.
    auto read_string = [&](size_t& length) {
        const bool huffman = (*at & 0x80) != 0;
        uint32_t encoded_length = 0;
        if (!read_integer(at, end, 7, encoded_length) || encoded_length > kMaxStringLength ||
            encoded_length > static_cast<size_t>(end - at))
            return false;
        if (huffman) {
            char* text = out.text_room(detail::huffman_decoded_size_bound(encoded_length));
            char* text_end = detail::huffman_decode(at, encoded_length, text);
            if (text_end == nullptr) return false;
            length = static_cast<size_t>(text_end - text);
        } else {
            char* text = out.text_room(encoded_length);
            if (encoded_length > 0) std::memcpy(text, at, encoded_length);
            length = encoded_length;
        }
        at += encoded_length;
        out.text_used_ += length;
        return true;
    };

    // Looks up an index (§2.3.3) and appends its name (and value) to out's text.
    auto read_index = [&](uint32_t index, bool with_value, size_t& name_length,
                          size_t& value_length, uint8_t& static_name_index) {
        std::string_view name;
        std::string_view value;
        if (index == 0) return false; // §6.1
        if (index <= detail::kHpackStaticEntries) {
            name = detail::kHpackStaticTable[index].name;
            value = detail::kHpackStaticTable[index].value;
            static_name_index = static_cast<uint8_t>(index);
        } else {
            const size_t dynamic = index - detail::kHpackStaticEntries - 1;
            if (dynamic >= table_.count()) return false; // §2.3.3: an index out of range
            detail::HpackDynamicTable::Entry entry = table_.get(dynamic);
            name = entry.name;
            value = entry.value;
            static_name_index = entry.static_name_index;
        }
        if (!with_value) value = {};
        name_length = name.size();
        if (static_name_index != 0) name = {}; // HpackHeaderList finds it in the static table
        char* text = out.text_room(name.size() + value.size());
        if (!name.empty()) std::memcpy(text, name.data(), name.size());
        if (!value.empty()) std::memcpy(text + name.size(), value.data(), value.size());
        out.text_used_ += name.size() + value.size();
        value_length = value.size();
        return true;
    };

    bool at_block_start = true;
    while (at != end) {
        const uint8_t first = *at;
        if ((first & 0xe0) == 0x20) { // §6.3: dynamic table size update
            uint32_t size = 0;
            // §4.2: only at the start of a block, and within our setting.
            if (!at_block_start || !read_integer(at, end, 5, size) || size > limits_.max_table_size)
                return HpackStatus::CompressionError;
            table_.set_max_size(size);
            size_update_required_ = false;
            continue;
        }
        at_block_start = false;
        // §4.2: after we lowered SETTINGS_HEADER_TABLE_SIZE, the first block must say so.
        if (size_update_required_) return HpackStatus::CompressionError;

        const size_t field_offset = out.text_used_;
        size_t name_length = 0;
        size_t value_length = 0;
        uint8_t static_name_index = 0;
        bool never_indexed = false;
        uint32_t index = 0;
        if (first & 0x80) { // §6.1: indexed field
            if (!read_integer(at, end, 7, index) ||
                !read_index(index, true, name_length, value_length, static_name_index))
                return HpackStatus::CompressionError;
        } else {
            // §6.2.1: 01 and a 6-bit index; §6.2.2: 0000 and §6.2.3: 0001, a 4-bit index.
            const bool incremental = (first & 0x40) != 0;
            never_indexed = !incremental && (first & 0x10) != 0;
            if (!read_integer(at, end, incremental ? 6 : 4, index))
                return HpackStatus::CompressionError;
            if (index == 0) {
                if (at == end || !read_string(name_length)) return HpackStatus::CompressionError;
            } else if (!read_index(index, false, name_length, value_length, static_name_index)) {
                return HpackStatus::CompressionError;
            }
            if (at == end || !read_string(value_length)) return HpackStatus::CompressionError;
            if (incremental) {
                const char* value = out.text_.data() + out.text_used_ - value_length;
                std::string_view name = static_name_index != 0
                                            ? detail::kHpackStaticTable[static_name_index].name
                                            : std::string_view(value - name_length, name_length);
                table_.insert(name, std::string_view(value, value_length), static_name_index);
            }
        }

        // Past the limit the rest of the block is still decoded (the table must
        // stay in step with the peer's) but nothing more is kept.
        const size_t field_size = name_length + value_length + detail::kHpackEntryOverhead;
        if (too_large || out.list_size_ + field_size > limits_.max_header_list_size) {
            too_large = true;
            out.text_used_ = field_offset;
            continue;
        }
        out.list_size_ += field_size;
        out.fields_.push_back(HpackHeaderList::Field{
            static_cast<uint32_t>(out.text_used_ - value_length),
            static_cast<uint32_t>(name_length), static_cast<uint32_t>(value_length),
            static_name_index, never_indexed});
    }
    if (size_update_required_) return HpackStatus::CompressionError; // an empty block is no update
    if (too_large) {
        out.clear();
        return HpackStatus::HeaderListTooLarge;
    }
    return HpackStatus::Ok;
}

} // namespace lepus
