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

// The longest static name is 27 bytes; names are looked up among those of
// their length only (at most 8 candidates), first index first.
constexpr size_t kLongestName = 27;

struct NamesByLength {
    uint8_t first[kLongestName + 2] = {}; // indices into `order` where each length starts
    uint8_t order[kHpackStaticEntries] = {};
};

NamesByLength sort_names_by_length() {
    NamesByLength names;
    size_t at = 0;
    for (size_t length = 0; length <= kLongestName; ++length) {
        names.first[length] = static_cast<uint8_t>(at);
        for (size_t i = 1; i <= kHpackStaticEntries; ++i)
            if (kHpackStaticTable[i].name.size() == length)
                names.order[at++] = static_cast<uint8_t>(i);
    }
    names.first[kLongestName + 1] = static_cast<uint8_t>(at);
    return names;
}

const NamesByLength kNamesByLength = sort_names_by_length();

} // namespace

uint8_t hpack_static_name_index(std::string_view name) {
    if (name.empty() || name.size() > kLongestName) return 0;
    for (size_t i = kNamesByLength.first[name.size()]; i < kNamesByLength.first[name.size() + 1];
         ++i) {
        uint8_t index = kNamesByLength.order[i];
        // The first byte tells apart nearly all names of one length: no call to memcmp.
        std::string_view candidate = kHpackStaticTable[index].name;
        if (candidate[0] == name[0] && candidate.back() == name.back() && candidate == name)
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
    const Slot& slot = slots_[(oldest_ + count_ - 1 - i) & (slot_capacity_ - 1)];
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
    size_ -= slot.name_length + slot.value_length + kHpackEntryOverhead;
    oldest_ = (oldest_ + 1) & (slot_capacity_ - 1);
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
        size_t capacity = std::max<size_t>(8, 2 * slot_capacity_);
        auto slots = std::make_unique<Slot[]>(capacity);
        for (size_t i = 0; i < count_; ++i)
            slots[i] = slots_[(oldest_ + i) & (slot_capacity_ - 1)];
        slots_ = std::move(slots);
        slot_capacity_ = capacity;
        oldest_ = 0;
    }
    char* at = bytes_.get() + bytes_used_;
    if (!name.empty()) std::memcpy(at, name.data(), name.size());
    if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
    slots_[(oldest_ + count_) & (slot_capacity_ - 1)] =
        Slot{static_cast<uint32_t>(bytes_used_), static_cast<uint32_t>(name.size()),
             static_cast<uint32_t>(value.size()), static_name_index};
    ++count_;
    bytes_used_ += length;
    size_ += length + kHpackEntryOverhead;
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
        byte_capacity_ = std::max<size_t>({256, 2 * byte_capacity_, 2 * (live + length)});
        grown = std::make_unique<char[]>(byte_capacity_);
        target = grown.get();
    }
    if (live > 0) std::memmove(target, bytes_.get() + live_start, live);
    for (size_t i = 0; i < count_; ++i)
        slots_[(oldest_ + i) & (slot_capacity_ - 1)].offset -= static_cast<uint32_t>(live_start);
    if (grown) bytes_ = std::move(grown);
    bytes_used_ = live;
}

} // namespace lepus::detail
