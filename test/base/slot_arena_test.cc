// SlotArena: slots of one size from one reserved range (issue 38, OpenSSL's
// SSL objects): reuse, alignment, exhaustion, and threads taking and giving
// back slots at once (run under TSan too).
#include "base/slot_arena.h"

#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <set>
#include <thread>
#include <vector>

namespace lepus {
namespace {

TEST(SlotArena, SlotsAreDistinctAlignedAndInRange) {
    SlotArena arena(7608, 1024);
    EXPECT_EQ(arena.slot_size(), 7616u); // rounded up to 16
    EXPECT_EQ(arena.capacity(), 1024u);
    std::set<char*> slots;
    for (int i = 0; i < 100; ++i) {
        auto* slot = static_cast<char*>(arena.allocate());
        ASSERT_NE(slot, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % 16, 0u);
        EXPECT_TRUE(arena.owns(slot));
        EXPECT_TRUE(arena.owns(slot + 7615));
        std::memset(slot, i, 7616); // the whole slot is ours: ASan would catch an overlap
        slots.insert(slot);
    }
    EXPECT_EQ(slots.size(), 100u);
    for (char* a : slots) { // no two overlap
        auto next = slots.upper_bound(a);
        if (next != slots.end()) {
            EXPECT_GE(*next - a, 7616);
        }
    }
    EXPECT_EQ(arena.slots_in_use(), 100u);
    int local = 0;
    EXPECT_FALSE(arena.owns(&local));
    for (char* slot : slots)
        arena.release(slot);
    EXPECT_EQ(arena.slots_in_use(), 0u);
}

TEST(SlotArena, AReleasedSlotIsTheNextOneGiven) {
    SlotArena arena(100, 64);
    void* first = arena.allocate();
    void* second = arena.allocate();
    arena.release(first);
    EXPECT_EQ(arena.allocate(), first); // memory already resident, before untouched slots
    arena.release(second);
    EXPECT_EQ(arena.allocate(), second);
}

TEST(SlotArena, AFullArenaSaysSoAndServesAgainAfterARelease) {
    SlotArena arena(64, 64);
    ASSERT_EQ(arena.capacity(), 64u);
    std::vector<void*> slots;
    for (int i = 0; i < 64; ++i)
        slots.push_back(arena.allocate());
    for (void* slot : slots)
        ASSERT_NE(slot, nullptr);
    EXPECT_EQ(arena.allocate(), nullptr);
    arena.release(slots[10]);
    EXPECT_EQ(arena.allocate(), slots[10]);
    EXPECT_EQ(arena.allocate(), nullptr);
}

TEST(SlotArena, ThreadsTakeAndGiveBackAtOnce) {
    SlotArena arena(7608, 4096);
    constexpr int kThreads = 4;
    constexpr int kRounds = 2000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&arena, t] {
            std::vector<char*> held;
            for (int round = 0; round < kRounds; ++round) {
                auto* slot = static_cast<char*>(arena.allocate());
                ASSERT_NE(slot, nullptr);
                slot[0] = static_cast<char>(t);
                slot[7615] = static_cast<char>(t);
                held.push_back(slot);
                if (held.size() > 8) { // give back the oldest, still marked as ours
                    EXPECT_EQ(held.front()[0], static_cast<char>(t));
                    EXPECT_EQ(held.front()[7615], static_cast<char>(t));
                    arena.release(held.front());
                    held.erase(held.begin());
                }
            }
            for (char* slot : held)
                arena.release(slot);
        });
    }
    for (std::thread& thread : threads)
        thread.join();
    EXPECT_EQ(arena.slots_in_use(), 0u);
}

} // namespace
} // namespace lepus
