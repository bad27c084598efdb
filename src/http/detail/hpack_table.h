// HPACK's tables (RFC 7541 §2.3): the static table and the dynamic table that
// the decoder and the encoder each keep. Internal to src/http/hpack_*.cc and
// their tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace lepus::detail {

struct HpackStaticEntry {
    std::string_view name;
    std::string_view value;
};

// RFC 7541 Appendix A, indexed 1..61 (entry 0 is empty and never used).
constexpr size_t kHpackStaticEntries = 61;
extern const HpackStaticEntry kHpackStaticTable[kHpackStaticEntries + 1];

// The lowest static index whose name is `name` (lowercase), or 0.
uint8_t hpack_static_name_index(std::string_view name);

// The static index of exactly (name, value), or 0, given the name's index
// from hpack_static_name_index (0: none).
uint8_t hpack_static_field_index(uint8_t name_index, std::string_view value);

// RFC 7541 §4.1: an entry's size is its name and value plus 32.
constexpr size_t kHpackEntryOverhead = 32;

// The dynamic table (§2.3.2, §4): a FIFO of (name, value) bounded by the sum of
// the entries' sizes. Entry bytes sit in one buffer, appended at its end and
// moved back to the front when the end is reached (amortized: the buffer is
// kept at least twice the live bytes), so an insertion allocates nothing once
// the table has grown; the buffer grows on demand, not up front, so an idle
// connection's table costs what it holds.
class HpackDynamicTable {
public:
    struct Entry {
        std::string_view name;
        std::string_view value;
        uint8_t
            static_name_index; // the name's static index, or 0: lets callers skip comparing names
    };

    explicit HpackDynamicTable(uint32_t max_size) : max_size_(max_size) {}

    // Entries held; index 0 is the newest (§2.3.3: dynamic index 62 + 0).
    size_t count() const { return count_; }
    // Sum of the entries' sizes (§4.1).
    size_t size() const { return size_; }
    uint32_t max_size() const { return max_size_; }

    // Entry `i` (0 = newest), i < count(). The views stay valid until the next insert or resize.
    Entry get(size_t i) const;

    // Sets the maximum size, evicting the oldest entries that no longer fit (§4.3).
    void set_max_size(uint32_t max_size);

    // Adds an entry, evicting older ones first; one larger than the maximum size
    // empties the table and is not added (§4.4). `name` and `value` must not
    // point into this table.
    void insert(std::string_view name, std::string_view value, uint8_t static_name_index);

    // Gives back the room the entries do not use: the ring and the bytes to
    // exactly the entries and their live bytes (none
    // when empty). For a connection going idle (issue 38): its tables keep what
    // they hold, not the doubling's slack; the next insert grows them again.
    // Invalidates the views get() returned; a table already tight is left as is.
    void shrink_to_fit();

private:
    struct Slot {
        uint32_t offset;
        uint32_t name_length;
        uint32_t value_length;
        uint8_t static_name_index;
    };

    void evict_oldest();
    // Makes room for `length` more bytes at bytes_used_.
    void reserve_bytes(size_t length);

    // 32-bit counts and offsets: the table holds at most max_size_ (a
    // uint32_t) bytes of entries, and 48 bytes instead of 72 take an idle
    // HTTP/2 connection's engine, which has two tables, down a tcmalloc size
    // class (issue 38).
    uint32_t max_size_;
    uint32_t size_ = 0;
    // A ring, of any capacity (not a power of two: shrink_to_fit() cuts it to
    // the count, issue 38). `position` < 2 * slot_capacity_.
    uint32_t ring(uint32_t position) const {
        return position < slot_capacity_ ? position : position - slot_capacity_;
    }
    std::unique_ptr<Slot[]> slots_;
    std::unique_ptr<char[]> bytes_;
    uint32_t slot_capacity_ = 0;
    uint32_t oldest_ = 0; // ring position of the oldest entry
    uint32_t count_ = 0;
    uint32_t byte_capacity_ = 0;
    uint32_t bytes_used_ = 0; // entries' bytes lie in [oldest's offset, bytes_used_)
};

} // namespace lepus::detail
