// HPACK, header compression for HTTP/2 (RFC 7541): a decoder for request header
// blocks and an encoder made for a server's responses.
//
// The HTTP/2 engine's (issue 38: src/http/http2_receive.cc decodes the
// requests, http2_send.cc encodes the responses).
// test/http/hpack_test.cc checks it against RFC 7541's examples and, as an
// oracle, nghttp2's inflater; test/fuzz/hpack_fuzz.cc does the same on
// generated inputs.
#pragma once

#include "http/detail/hpack_table.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

// The default of SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2).
constexpr uint32_t kHpackDefaultTableSize = 4096;

enum class HpackStatus : uint8_t {
    Ok,
    // The block cannot be decoded: a connection error of type COMPRESSION_ERROR
    // (RFC 9113 §4.3); the decoder's state is lost and must not be used again.
    CompressionError,
    // The block decoded, but its fields add up to more than the header list
    // limit: the request is refused (431 or RST_STREAM) while the connection
    // goes on; the dynamic table was kept in step, the list holds no fields.
    HeaderListTooLarge,
};

struct HpackField {
    std::string_view name;
    std::string_view value;
    uint8_t
        static_name_index; // the name's index in the static table when it came from there, else 0
    bool never_indexed;    // sent as never indexed (§6.2.3): an intermediary must keep it so
};

// The decoded fields of one header block, in order. Reused from block to block:
// its buffers keep their capacity, so decoding allocates nothing once they
// have grown to the largest block seen.
class HpackHeaderList {
public:
    size_t size() const { return fields_.size(); }
    bool empty() const { return fields_.empty(); }
    HpackField operator[](size_t i) const {
        const Field& field = fields_[i];
        // A name with a static index is that entry's name, never copied.
        std::string_view name =
            field.static_name_index != 0
                ? detail::kHpackStaticTable[field.static_name_index].name
                : std::string_view(text_.data() + field.value_offset - field.name_length,
                                   field.name_length);
        return HpackField{name,
                          std::string_view(text_.data() + field.value_offset, field.value_length),
                          field.static_name_index, field.never_indexed};
    }
    // The text the fields lie in, and where field `i`'s value starts in it (a
    // name without a static index lies just before its value): lets a caller
    // copy a whole list at once and keep the fields as offsets.
    std::string_view text() const { return {text_.data(), text_used_}; }
    size_t value_offset(size_t i) const { return fields_[i].value_offset; }
    // RFC 9113 §6.5.2's size of the list: names and values plus 32 per field.
    size_t list_size() const { return list_size_; }
    void clear() {
        fields_.clear();
        text_used_ = 0;
        list_size_ = 0;
    }

private:
    friend class HpackDecoder;
    struct Field {
        uint32_t value_offset; // a name without a static index is just before its value
        uint32_t name_length;
        uint32_t value_length;
        uint8_t static_name_index;
        bool never_indexed;
    };
    // Room for `length` more bytes of text at text_used_.
    char* text_room(size_t length) {
        if (text_used_ + length > text_.size())
            text_.resize(std::max(2 * text_.size(), text_used_ + length));
        return text_.data() + text_used_;
    }

    std::vector<Field> fields_;
    std::vector<char> text_; // its size is the capacity in use; text_used_ the bytes written
    size_t text_used_ = 0;
    size_t list_size_ = 0;
};

// Decodes the header blocks a peer's encoder sends on one connection, in order.
class HpackDecoder {
public:
    struct Limits {
        // Our SETTINGS_HEADER_TABLE_SIZE: the largest dynamic table the peer may ask for (§4.2).
        uint32_t max_table_size = kHpackDefaultTableSize;
        // Our SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2), enforced on the
        // decoded list: a small block that references one large table entry
        // many times (the "HPACK bomb") stops here.
        size_t max_header_list_size = size_t{64} * 1024;
    };

    explicit HpackDecoder(Limits limits) : limits_(limits), table_(limits.max_table_size) {}
    HpackDecoder() : HpackDecoder(Limits{}) {}

    // Decodes one complete header block (a HEADERS payload and its
    // CONTINUATIONs, joined) into `out`, which is cleared first.
    HpackStatus decode(std::span<const uint8_t> block, HpackHeaderList& out);

    // Our SETTINGS_HEADER_TABLE_SIZE changed (call once the peer acknowledged
    // the SETTINGS). When it is below the table's current limit, the peer must
    // start its next block with a size update (§4.2) and the table is cut now.
    void set_max_table_size(uint32_t max_table_size);

    // The dynamic table, for tests and memory accounting.
    const detail::HpackDynamicTable& table() const { return table_; }
    // The connection went idle: the table keeps only the room its entries use.
    void shrink_table() { table_.shrink_to_fit(); }

private:
    Limits limits_;
    detail::HpackDynamicTable table_;
    bool size_update_required_ = false;
};

// How a field is sent (§6.2).
enum class HpackIndexing : uint8_t {
    // Added to the dynamic table, then sent as one index while it stays there:
    // for values repeated from response to response (server, content-type).
    Incremental,
    // Sent literally, not added: values that change with every response
    // (content-length, etag, last-modified); adding them would only evict the
    // entries that repeat.
    WithoutIndexing,
    // Sent literally and marked so no intermediary indexes it (§7.1.3): secrets
    // such as set-cookie or authorization values.
    NeverIndexed,
};

// Encodes response header blocks for one connection, in order. Appends to a
// caller's std::string so a head is written once into its frame buffer.
class HpackEncoder {
public:
    // `max_table_size` is the table we are willing to keep; the table used is
    // the smaller of it and the peer's SETTINGS_HEADER_TABLE_SIZE.
    explicit HpackEncoder(uint32_t max_table_size = kHpackDefaultTableSize);

    // The peer's SETTINGS_HEADER_TABLE_SIZE (received in its SETTINGS). The
    // resulting size is announced at the start of the next block (§6.3).
    void set_peer_max_table_size(uint32_t peer_max_table_size);

    // Starts a header block: writes a pending dynamic table size update (§4.2).
    void begin_block(std::string& out);

    // :status, by its static index for 200, 204, 206, 304, 400, 404 and 500.
    void encode_status(unsigned status, std::string& out);

    // One field; `name` in lowercase (RFC 9113 §8.2.1). A static-table name
    // is sent by its index, a field the tables hold whole by its index.
    void encode(std::string_view name, std::string_view value, HpackIndexing indexing,
                std::string& out);
    // The same, for a caller that knows the name's static index
    // (detail::hpack_static_name_index(name), 0: none): no lookup.
    void encode_known(uint8_t static_name, std::string_view name, std::string_view value,
                      HpackIndexing indexing, std::string& out);

    // Whether WithoutIndexing and NeverIndexed values are Huffman-coded when
    // that is shorter (default: no, sent as they are). These values change
    // every response and are mostly digits, dates and hex: the coding saves a
    // few bytes of a head that fits one packet either way and costs several
    // times what copying does (bench/hpack_bench.cc, docs/BENCHMARKS.md).
    void set_huffman_for_literals(bool on) { huffman_for_literals_ = on; }

    const detail::HpackDynamicTable& table() const { return table_; }
    // The connection went idle: the encoder forgets its table's entries and
    // frees it (issue 38: an idle connection holds no encoder table). Nothing
    // is sent: the peer's decoder keeps the entries, which stay harmless
    // because eviction is oldest first and indices count from the newest
    // (§2.3.3, §4.4): the entries this encoder inserts from now on are the
    // newest of the peer's table, at the indices it expects, and the peer
    // evicts the forgotten ones before them. Changes state_id().
    void forget_table();

    // Names this encoder's dynamic table as it is now, unique among the
    // encoders of the thread: it changes whenever the table does. Two
    // encodings of the same fields under the same state_id() are the same
    // bytes (the HTTP/2 engine reuses a response head's block that way).
    uint64_t state_id() const { return state_id_; }

private:
    static uint64_t next_state_id() {
        thread_local uint64_t last = 0;
        return ++last;
    }

    // The dynamic index (62 + position) of (name, value), or 0; `name_index`
    // gets the index of an entry with that name when there is no exact match.
    // `static_name` is the name's static index (0: none): entries are compared by it.
    size_t find(std::string_view name, uint8_t static_name, std::string_view value,
                size_t& name_index) const;

    uint32_t own_max_table_size_;
    detail::HpackDynamicTable table_;
    // The smallest size the table passed through since the last block, and the
    // size now: both go in the next size update (§4.2).
    uint32_t smallest_pending_size_ = 0;
    bool size_update_pending_ = false;
    bool huffman_for_literals_ = false;
    uint64_t state_id_ = next_state_id();
};

} // namespace lepus
