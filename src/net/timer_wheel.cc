#include "net/timer_wheel.h"

#include <bit>

namespace lepus {

namespace {

constexpr uint64_t kSlotMask = TimerWheel::kSlotsPerLevel - 1;
constexpr uint64_t kSpanMask = (uint64_t(1) << TimerWheel::kSpanBits) - 1;
constexpr uint64_t kNoEvent = UINT64_MAX;

constexpr unsigned shift_of(unsigned level) {
    return level * TimerWheel::kBitsPerLevel;
}

} // namespace

TimerEntry::~TimerEntry() {
    if (wheel_) wheel_->cancel(*this);
}

TimerWheel::TimerWheel(uint64_t now_ms) : now_(now_ms) {
    for (TimerEntry& anchor : lists_)
        list_init(anchor);
}

TimerWheel::~TimerWheel() {
    for (TimerEntry& anchor : lists_) {
        while (!list_empty(anchor))
            cancel(*anchor.next_);
    }
}

void TimerWheel::schedule(TimerEntry& entry, uint64_t deadline_ms) {
    if (entry.wheel_ == this) {
        unlink(entry);
    } else {
        if (entry.wheel_) entry.wheel_->cancel(entry);
        entry.wheel_ = this;
        ++size_;
    }
    entry.deadline_ = deadline_ms;
    link(entry);
}

void TimerWheel::refresh(TimerEntry& entry, uint64_t deadline_ms, uint64_t slack_ms) {
    // The common case for keepalive and read timeouts: the deadline moved a few
    // milliseconds later. Leaving the entry where it is costs an early wake-up
    // that the owner's callback absorbs (see the contract in the header).
    if (entry.wheel_ == this && deadline_ms >= entry.deadline_ &&
        deadline_ms - entry.deadline_ < slack_ms)
        return;
    schedule(entry, deadline_ms);
}

void TimerWheel::cancel(TimerEntry& entry) {
    if (entry.wheel_ != this) return;
    unlink(entry);
    entry.wheel_ = nullptr;
    --size_;
}

size_t TimerWheel::expire(uint64_t now_ms) {
    if (expiring_) return 0; // a callback called expire(): its caller will finish the batch

    // Entries due at now_ (deadlines in the past land here too).
    move_to_expired(uint16_t(now_ & kSlotMask));
    // Jump from event to event rather than from millisecond to millisecond: an
    // event is a level-0 slot to fire or a higher slot whose time has come to
    // be cascaded down, and the occupancy masks find the next one in O(kLevels).
    for (;;) {
        const uint64_t t = next_event_after_now();
        if (t > now_ms) break;
        now_ = t;
        if ((t & kSpanMask) == 0 && !list_empty(lists_[kOverflowList])) relink_all(kOverflowList);
        if ((t & kSlotMask) == 0) {
            // t starts a slot of level k (the highest level whose lower bits are
            // all zero). Every lower level is empty here, because their slots all
            // began before t and t is the earliest event.
            unsigned level = unsigned(std::countr_zero(t)) / kBitsPerLevel;
            if (level >= kLevels) level = kLevels - 1;
            if (level > 0)
                relink_all(uint16_t(uint64_t{level} * kSlotsPerLevel +
                                    ((t >> shift_of(level)) & kSlotMask)));
        }
        move_to_expired(uint16_t(t & kSlotMask));
    }
    // No slot starts in (now_, now_ms], so every entry stays in a valid slot.
    if (now_ms > now_) now_ = now_ms;

    // Run the batch. Each entry is unlinked before its callback, so a callback
    // that cancels, re-schedules or destroys a later entry of the batch simply
    // takes it out of the batch list.
    expiring_ = true;
    size_t fired = 0;
    TimerEntry& batch = lists_[kExpiredList];
    while (!list_empty(batch)) {
        TimerEntry& entry = *batch.next_;
        cancel(entry);
        ++fired;
        if (entry.callback_) entry.callback_(entry);
    }
    expiring_ = false;
    return fired;
}

std::optional<uint64_t> TimerWheel::next_expiry() const {
    if (size_ == 0) return std::nullopt;
    if (occupied_[0] & (uint64_t(1) << (now_ & kSlotMask))) return now_;
    const uint64_t t = next_event_after_now();
    if (t != kNoEvent) return t;
    // Only a batch being fired remains (next_expiry called from a callback).
    return list_empty(lists_[kExpiredList]) ? std::nullopt : std::optional<uint64_t>(now_);
}

bool TimerWheel::validate() const {
    size_t count = 0;
    for (uint16_t index = 0; index < kListCount; ++index) {
        const TimerEntry& anchor = lists_[index];
        if (anchor.next_->prev_ != &anchor || anchor.prev_->next_ != &anchor) return false;
        for (const TimerEntry* entry = anchor.next_; entry != &anchor; entry = entry->next_) {
            if (entry->next_->prev_ != entry || entry->wheel_ != this || entry->slot_ != index)
                return false;
            if (index != kExpiredList && list_for(entry->deadline_) != index) return false;
            ++count;
        }
        if (index < kOverflowList) {
            const bool bit = occupied_[index / kSlotsPerLevel] >> (index % kSlotsPerLevel) & 1;
            if (bit == list_empty(anchor)) return false;
        }
    }
    if (!expiring_ && !list_empty(lists_[kExpiredList])) return false;
    return count == size_;
}

void TimerWheel::list_append(TimerEntry& anchor, TimerEntry& entry) {
    entry.prev_ = anchor.prev_;
    entry.next_ = &anchor;
    anchor.prev_->next_ = &entry;
    anchor.prev_ = &entry;
}

uint16_t TimerWheel::list_for(uint64_t deadline) const {
    // The level is set by the highest bit in which the deadline differs from
    // now: below it the entry needs the finer levels, above it nothing changes
    // until time reaches the entry's slot. Since the deadline is the larger of
    // the two, its slot index on that level is above now's.
    const uint64_t position = deadline < now_ ? now_ : deadline;
    const uint64_t difference = position ^ now_;
    if (difference > kSpanMask) return kOverflowList;
    const auto width = unsigned(std::bit_width(difference));
    const unsigned level = width == 0 ? 0 : (width - 1) / kBitsPerLevel;
    return uint16_t(uint64_t{level} * kSlotsPerLevel + ((position >> shift_of(level)) & kSlotMask));
}

void TimerWheel::link(TimerEntry& entry) {
    const uint16_t index = list_for(entry.deadline_);
    entry.slot_ = index;
    list_append(lists_[index], entry);
    if (index < kOverflowList)
        occupied_[index / kSlotsPerLevel] |= uint64_t(1) << (index % kSlotsPerLevel);
}

void TimerWheel::unlink(TimerEntry& entry) {
    entry.prev_->next_ = entry.next_;
    entry.next_->prev_ = entry.prev_;
    entry.prev_ = entry.next_ = nullptr;
    const uint16_t index = entry.slot_;
    if (index < kOverflowList && list_empty(lists_[index]))
        occupied_[index / kSlotsPerLevel] &= ~(uint64_t(1) << (index % kSlotsPerLevel));
}

uint64_t TimerWheel::next_event_after_now() const {
    // The candidate of level k lies before the end of now's level-(k+1) slot,
    // hence before any candidate of level k+1: the first level with one wins.
    for (unsigned level = 0; level < kLevels; ++level) {
        const unsigned shift = shift_of(level);
        const auto current = unsigned((now_ >> shift) & kSlotMask);
        const uint64_t later =
            current == kSlotMask ? 0 : occupied_[level] & (~uint64_t(0) << (current + 1));
        if (later == 0) continue;
        const uint64_t block_start = now_ & ~((uint64_t(1) << (shift + kBitsPerLevel)) - 1);
        return block_start + (uint64_t(std::countr_zero(later)) << shift);
    }
    if (!list_empty(lists_[kOverflowList]) && (now_ | kSpanMask) != UINT64_MAX)
        return (now_ | kSpanMask) + 1;
    return kNoEvent;
}

void TimerWheel::move_to_expired(uint16_t index) {
    TimerEntry& anchor = lists_[index];
    if (list_empty(anchor)) return;
    while (!list_empty(anchor)) {
        TimerEntry& entry = *anchor.next_;
        unlink(entry);
        entry.slot_ = kExpiredList;
        list_append(lists_[kExpiredList], entry);
    }
}

void TimerWheel::relink_all(uint16_t index) {
    // Detach the whole list first: an entry may land back in the list being
    // emptied (overflow entries still out of range do).
    TimerEntry pending;
    list_init(pending);
    TimerEntry& anchor = lists_[index];
    if (list_empty(anchor)) return;
    pending.next_ = anchor.next_;
    pending.prev_ = anchor.prev_;
    pending.next_->prev_ = &pending;
    pending.prev_->next_ = &pending;
    list_init(anchor);
    if (index < kOverflowList)
        occupied_[index / kSlotsPerLevel] &= ~(uint64_t(1) << (index % kSlotsPerLevel));
    while (!list_empty(pending)) {
        TimerEntry& entry = *pending.next_;
        entry.prev_->next_ = entry.next_;
        entry.next_->prev_ = entry.prev_;
        link(entry);
    }
}

} // namespace lepus
