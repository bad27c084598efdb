// HPACK's static table (RFC 7541 Appendix A) and dynamic table (§4).
#include "http/detail/hpack_table.h"

#include <algorithm>
#include <cstring>

namespace lepus::detail {

const HpackStaticEntry kHpackStaticTable[kHpackStaticEntries + 1] = {
    {"", ""},
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
};

namespace {

// The static names in an open-addressed table (51 distinct names in 128
// slots, linear probing): a lookup hashes the length and two bytes and
// usually compares one candidate. Each name maps to its lowest index.
constexpr size_t kNameSlots = 128;

size_t name_slot(std::string_view name) {
    return (name.size() * 31 + size_t{static_cast<uint8_t>(name[0])} * 7 +
            size_t{static_cast<uint8_t>(name.back())} * 3) %
           kNameSlots;
}

struct NameTable {
    uint8_t slot[kNameSlots] = {}; // 0: empty
};

NameTable hash_names() {
    NameTable table;
    for (size_t i = 1; i <= kHpackStaticEntries; ++i) {
        std::string_view name = kHpackStaticTable[i].name;
        size_t at = name_slot(name);
        while (table.slot[at] != 0 && kHpackStaticTable[table.slot[at]].name != name)
            at = (at + 1) % kNameSlots;
        if (table.slot[at] == 0) table.slot[at] = static_cast<uint8_t>(i); // the lowest index
    }
    return table;
}

const NameTable kNames = hash_names();

} // namespace

uint8_t hpack_static_name_index(std::string_view name) {
    if (name.empty()) return 0;
    for (size_t at = name_slot(name); kNames.slot[at] != 0; at = (at + 1) % kNameSlots) {
        uint8_t index = kNames.slot[at];
        std::string_view candidate = kHpackStaticTable[index].name;
        if (candidate.size() == name.size() && candidate[0] == name[0] && candidate == name)
            return index;
    }
    return 0;
}

uint8_t hpack_static_field_index(uint8_t name_index, std::string_view value) {
    if (name_index == 0) return 0;
    // Entries with a value (2..16) share a name with their neighbours.
    const std::string_view name = kHpackStaticTable[name_index].name;
    for (size_t index = name_index;
         index <= kHpackStaticEntries && kHpackStaticTable[index].name == name; ++index)
        if (kHpackStaticTable[index].value == value) return static_cast<uint8_t>(index);
    return 0;
}

HpackDynamicTable::Entry HpackDynamicTable::get(size_t i) const {
    const Slot& slot = slots_[ring(oldest_ + count_ - 1 - i)];
    const char* at = bytes_.get() + slot.offset;
    return Entry{std::string_view(at, slot.name_length),
                 std::string_view(at + slot.name_length, slot.value_length),
                 slot.static_name_index};
}

void HpackDynamicTable::set_max_size(uint32_t max_size) {
    max_size_ = max_size;
    while (size_ > max_size_)
        evict_oldest();
}

void HpackDynamicTable::evict_oldest() {
    const Slot& slot = slots_[oldest_];
    size_ -= static_cast<uint32_t>(slot.name_length + slot.value_length + kHpackEntryOverhead);
    oldest_ = ring(oldest_ + 1);
    if (--count_ == 0) bytes_used_ = 0; // start again at the front: nothing to move
}

void HpackDynamicTable::insert(std::string_view name, std::string_view value,
                               uint8_t static_name_index) {
    const size_t length = name.size() + value.size();
    if (length + kHpackEntryOverhead > max_size_) { // §4.4: not an error, the table is emptied
        while (count_ > 0)
            evict_oldest();
        return;
    }
    while (size_ + length + kHpackEntryOverhead > max_size_)
        evict_oldest();
    reserve_bytes(length);
    if (count_ == slot_capacity_) {
        uint32_t capacity = std::max<uint32_t>(4, 2 * slot_capacity_);
        auto slots = std::make_unique<Slot[]>(capacity);
        for (uint32_t i = 0; i < count_; ++i)
            slots[i] = slots_[ring(oldest_ + i)];
        slots_ = std::move(slots);
        slot_capacity_ = capacity;
        oldest_ = 0;
    }
    char* at = bytes_.get() + bytes_used_;
    if (!name.empty()) std::memcpy(at, name.data(), name.size());
    if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
    slots_[ring(oldest_ + count_)] =
        Slot{static_cast<uint32_t>(bytes_used_), static_cast<uint32_t>(name.size()),
             static_cast<uint32_t>(value.size()), static_name_index};
    ++count_;
    bytes_used_ += static_cast<uint32_t>(length);
    size_ += static_cast<uint32_t>(length + kHpackEntryOverhead);
}

void HpackDynamicTable::reserve_bytes(size_t length) {
    if (bytes_used_ + length <= byte_capacity_) return;
    const size_t live_start = count_ > 0 ? slots_[oldest_].offset : bytes_used_;
    const size_t live = bytes_used_ - live_start;
    // Grow when the live bytes would fill more than half the buffer, so that a
    // move frees at least as many bytes as it copies; otherwise move them to the front.
    char* target = bytes_.get();
    std::unique_ptr<char[]> grown;
    if (2 * (live + length) > byte_capacity_) {
        // From 64 bytes: an idle HTTP/2 connection's tables hold a few short
        // entries (issue 38: 0.17 KiB less per idle connection than from 256).
        byte_capacity_ = static_cast<uint32_t>(
            std::max<size_t>({64, 2 * size_t{byte_capacity_}, 2 * (live + length)}));
        grown = std::make_unique<char[]>(byte_capacity_);
        target = grown.get();
    }
    if (live > 0) std::memmove(target, bytes_.get() + live_start, live);
    for (uint32_t i = 0; i < count_; ++i)
        slots_[ring(oldest_ + i)].offset -= static_cast<uint32_t>(live_start);
    if (grown) bytes_ = std::move(grown);
    bytes_used_ = static_cast<uint32_t>(live);
}

void HpackDynamicTable::shrink_to_fit() {
    if (count_ == 0) {
        if (slot_capacity_ == 0 && byte_capacity_ == 0) return;
        slots_.reset();
        bytes_.reset();
        slot_capacity_ = byte_capacity_ = oldest_ = bytes_used_ = 0;
        return;
    }
    const uint32_t slot_capacity = count_;
    const uint32_t live_start = slots_[oldest_].offset;
    const uint32_t live = bytes_used_ - live_start;
    if (slot_capacity == slot_capacity_ && live == byte_capacity_) return;
    auto slots = std::make_unique<Slot[]>(slot_capacity);
    for (uint32_t i = 0; i < count_; ++i) {
        slots[i] = slots_[ring(oldest_ + i)];
        slots[i].offset -= live_start;
    }
    auto bytes = std::make_unique<char[]>(live);
    if (live > 0) std::memcpy(bytes.get(), bytes_.get() + live_start, live);
    slots_ = std::move(slots);
    bytes_ = std::move(bytes);
    slot_capacity_ = slot_capacity;
    oldest_ = 0;
    byte_capacity_ = live;
    bytes_used_ = live;
}

} // namespace lepus::detail
