// SlotArena: slots of one fixed size carved from one reserved address range,
// for objects that a general allocator would round up by much (issue 38:
// OpenSSL's 7,608-byte SSL, which tcmalloc puts in its 8 KiB class). Only the
// address space is reserved up front: a slot's pages become resident when it
// is first written, and a released slot is kept for the next allocate() (its
// memory is not given back to the system, as with any malloc's free lists).
// Thread-safe; one lock per allocate() and release(), which suits objects made
// once per connection, not per request.
#pragma once

#include <cstddef>
#include <mutex>

namespace lepus {

class SlotArena {
public:
    // Reserves room for up to `max_slots` slots of `slot_size` bytes (rounded
    // up to 16, the alignment malloc gives), fewer if the system refuses that
    // much address space (halving down to 64; none: every allocate() fails).
    SlotArena(size_t slot_size, size_t max_slots);
    ~SlotArena();
    SlotArena(const SlotArena&) = delete;
    SlotArena& operator=(const SlotArena&) = delete;

    // A free slot, 16-byte aligned, or null when every slot is taken.
    void* allocate();
    // Gives back a slot allocate() returned.
    void release(void* slot);
    // Whether `pointer` lies in this arena's range (any slot, taken or not).
    bool owns(const void* pointer) const { return pointer >= begin_ && pointer < end_; }

    size_t slot_size() const { return slot_size_; }
    size_t capacity() const { return static_cast<size_t>(end_ - begin_) / slot_size_; }
    size_t slots_in_use() const;

private:
    struct FreeSlot {
        FreeSlot* next;
    };

    const size_t slot_size_;
    char* begin_ = nullptr;
    char* end_ = nullptr;
    mutable std::mutex mutex_;
    char* untouched_ = nullptr; // slots from here to end_ were never handed out
    FreeSlot* free_ = nullptr;  // released slots, the last released first
    size_t in_use_ = 0;
};

} // namespace lepus
