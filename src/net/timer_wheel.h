// TimerWheel: the per-reactor hierarchical hashed timing wheel (Varghese &
// Lauck; h2o lib/common/timerwheel.c and the Linux kernel's timer wheel are the
// models). Entries are intrusive: a TimerEntry is embedded in the connection
// that owns it, so schedule, refresh and cancel are O(1) and never allocate.
//
// Layout: kLevels levels of 64 slots; level k slot s holds the entries whose
// deadline agrees with "now" on every bit above 6(k+1) and whose bits
// 6k..6k+5 equal s. Level 0 therefore has millisecond slots; an entry of level
// k > 0 is moved down ("cascaded") when time reaches the start of its slot,
// at most kLevels - 1 times in its life. Deadlines more than 2^36 ms (~795
// days) ahead wait in an overflow list that is looked at once per 2^36 ms.
// A 64-bit occupancy mask per level lets expire() and next_expiry() jump
// straight to the next non-empty slot, so an idle wheel costs nothing.
//
// Threads: a wheel and its entries belong to one thread (the reactor's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace lepus {

class TimerWheel;

// One timer, embedded in its owner. Neither copyable nor movable: the wheel
// links to it by address. The callback recovers the owner from the entry,
// e.g. reinterpret_cast<Conn*>(reinterpret_cast<char*>(&entry) - offsetof(Conn, timer)).
struct TimerEntry {
    using Callback = void (*)(TimerEntry& entry);

    explicit TimerEntry(Callback callback = nullptr) : callback_(callback) {}
    // Unlinks itself if still scheduled, so an owner may be destroyed at any time
    // (even from another entry's callback while both are in the same expired batch).
    ~TimerEntry();
    TimerEntry(const TimerEntry&) = delete;
    TimerEntry& operator=(const TimerEntry&) = delete;

    // Whether the entry is in a wheel (including the batch expire() is about to fire).
    bool scheduled() const { return wheel_ != nullptr; }
    // The deadline given to the last schedule() (or refresh() that re-linked).
    uint64_t deadline() const { return deadline_; }
    // Replaces the callback; allowed while scheduled.
    void set_callback(Callback callback) { callback_ = callback; }

private:
    friend class TimerWheel;

    TimerEntry* prev_ = nullptr; // circular doubly-linked list through a slot's anchor
    TimerEntry* next_ = nullptr;
    TimerWheel* wheel_ = nullptr;
    uint64_t deadline_ = 0;
    Callback callback_;
    uint16_t slot_ = 0; // level * 64 + slot, or one of TimerWheel's special lists
};

// A TimerEntry that knows its owner: the callback gets the owner back with
// owner_of(), for owners that are not standard layout (where offsetof is undefined).
template <typename Owner> struct OwnedTimerEntry : TimerEntry {
    OwnedTimerEntry(Owner* owner, Callback callback) : TimerEntry(callback), owner(owner) {}
    static Owner& owner_of(TimerEntry& entry) {
        return *static_cast<OwnedTimerEntry&>(entry).owner;
    }
    Owner* owner;
};

class TimerWheel {
public:
    static constexpr unsigned kBitsPerLevel = 6;
    static constexpr unsigned kSlotsPerLevel = 1u << kBitsPerLevel;
    static constexpr unsigned kLevels = 6;
    // Deadlines whose distance from now (as an XOR) reaches this wait in the overflow list.
    static constexpr unsigned kSpanBits = kBitsPerLevel * kLevels;

    explicit TimerWheel(uint64_t now_ms);
    // Unlinks every entry still scheduled (their scheduled() turns false).
    ~TimerWheel();
    TimerWheel(const TimerWheel&) = delete;
    TimerWheel& operator=(const TimerWheel&) = delete;

    // (Re)schedules `entry` to fire at deadline_ms; a deadline in the past fires at
    // the next expire(). Moves the entry from another wheel if needed.
    void schedule(TimerEntry& entry, uint64_t deadline_ms);

    // Like schedule(), but does nothing when the entry is already scheduled here
    // and deadline_ms is at most slack_ms - 1 later than its current deadline:
    // refresh on every request then touches one cache line. Contract: the entry
    // may then fire up to slack_ms early, so its callback must compare the
    // owner's real deadline with the wheel's time and re-schedule if it is not
    // due yet (nginx's keepalive timer does the same with 300 ms).
    void refresh(TimerEntry& entry, uint64_t deadline_ms, uint64_t slack_ms = 300);

    // Unschedules `entry` (no-op if not scheduled here).
    void cancel(TimerEntry& entry);

    // Fires every entry whose deadline <= now_ms. The expired entries are
    // collected first, then their callbacks run; a callback may schedule,
    // refresh or cancel any entry (itself included) or destroy other entries'
    // owners: an entry cancelled or re-scheduled before its turn does not fire.
    // Entries scheduled by callbacks with deadlines <= now_ms fire at the next
    // call. A now_ms earlier than the previous call counts as the previous call's
    // time. Not re-entrant. Returns how many callbacks ran.
    size_t expire(uint64_t now_ms);

    // The earliest time at which expire() may have work, for arming a timerfd;
    // nullopt when nothing is scheduled. Never later than the earliest deadline;
    // earlier only when that entry first has to be cascaded to a lower level, so
    // an idle reactor wakes at most kLevels times for one far timer.
    std::optional<uint64_t> next_expiry() const;

    // The wheel's current time: the largest now_ms given to expire() (or the constructor).
    uint64_t now() const { return now_; }
    // Scheduled entries, including those expire() is about to fire.
    size_t size() const { return size_; }
    // Checks every invariant (links, slot ranges, occupancy masks, size); for tests.
    bool validate() const;

private:
    static constexpr uint16_t kOverflowList = kLevels * kSlotsPerLevel;
    static constexpr uint16_t kExpiredList = kOverflowList + 1;
    static constexpr uint16_t kListCount = kExpiredList + 1;

    static bool list_empty(const TimerEntry& anchor) { return anchor.next_ == &anchor; }
    static void list_init(TimerEntry& anchor) { anchor.prev_ = anchor.next_ = &anchor; }
    static void list_append(TimerEntry& anchor, TimerEntry& entry);

    void link(TimerEntry& entry);
    void unlink(TimerEntry& entry);
    // Where an entry with this deadline belongs relative to now_.
    uint16_t list_for(uint64_t deadline) const;
    // The first time after now_ at which a slot must be cascaded or fired.
    uint64_t next_event_after_now() const;
    // Empties list `index` into the expired batch, or re-links its entries.
    void move_to_expired(uint16_t index);
    void relink_all(uint16_t index);

    uint64_t now_;
    size_t size_ = 0;
    bool expiring_ = false;
    uint64_t occupied_[kLevels] = {}; // bit s of level k: slot (k, s) is non-empty
    // Anchors of the slot lists, then the overflow list and the expired batch.
    TimerEntry lists_[kListCount];
};

} // namespace lepus
