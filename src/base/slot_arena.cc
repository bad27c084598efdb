#include "base/slot_arena.h"

#include <sys/mman.h>

namespace lepus {

namespace {

constexpr size_t kAlignment = 16;
constexpr size_t kMinSlots = 64;

} // namespace

SlotArena::SlotArena(size_t slot_size, size_t max_slots)
    : slot_size_((slot_size + kAlignment - 1) / kAlignment * kAlignment) {
    // MAP_NORESERVE: address space, not memory; a system in strict overcommit
    // mode may still refuse a large range, so ask for less until it agrees.
    for (size_t slots = max_slots; slots >= kMinSlots; slots /= 2) {
        void* range = mmap(nullptr, slots * slot_size_, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (range == MAP_FAILED) continue;
        begin_ = static_cast<char*>(range);
        end_ = begin_ + slots * slot_size_;
        break;
    }
    untouched_ = begin_;
}

SlotArena::~SlotArena() {
    if (begin_ != nullptr) munmap(begin_, static_cast<size_t>(end_ - begin_));
}

void* SlotArena::allocate() {
    std::lock_guard lock(mutex_);
    void* slot = nullptr;
    if (free_ != nullptr) {
        slot = free_;
        free_ = free_->next;
    } else if (untouched_ != end_) {
        slot = untouched_;
        untouched_ += slot_size_;
    } else {
        return nullptr;
    }
    ++in_use_;
    return slot;
}

void SlotArena::release(void* slot) {
    std::lock_guard lock(mutex_);
    auto* released = static_cast<FreeSlot*>(slot);
    released->next = free_;
    free_ = released;
    --in_use_;
}

size_t SlotArena::slots_in_use() const {
    std::lock_guard lock(mutex_);
    return in_use_;
}

} // namespace lepus
