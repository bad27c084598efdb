#include "net/tls_memory.h"

#include "base/slot_arena.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <openssl/crypto.h>

namespace lepus {

namespace {

// Requests above this are rounded up to 8 KiB by tcmalloc; below it, its
// classes are within 1 KiB of each other and an exact slot would save little.
constexpr size_t kArenaFloor = size_t{7} * 1024;
// Address space for this many connections' SSL objects (465 MiB reserved,
// resident only as used); beyond them, SSL objects come from malloc again.
constexpr size_t kArenaSlots = size_t{64} * 1024;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

bool installed = false;
// Made once by size_tls_memory(), possibly while reactors already allocate
// (the first https:// listener added by a reload): published atomically, and
// never deleted, since OpenSSL frees what it still holds in its own exit handler.
std::atomic<SlotArena*> arena{nullptr};
// While size_tls_memory() makes a throwaway SSL on this thread: the largest
// request above the floor, which is the SSL itself.
thread_local bool probing = false;
thread_local size_t probed_size = 0;

void* tls_malloc(size_t size, const char* /*file*/, int /*line*/) {
    if (size > kArenaFloor) {
        if (probing) probed_size = std::max(probed_size, size);
        SlotArena* slots = arena.load(std::memory_order_acquire);
        if (slots != nullptr && size <= slots->slot_size()) {
            if (void* slot = slots->allocate()) return slot;
        }
    }
    return std::malloc(size);
}

void tls_free(void* pointer, const char* /*file*/, int /*line*/) {
    SlotArena* slots = arena.load(std::memory_order_acquire);
    if (slots != nullptr && slots->owns(pointer)) {
        slots->release(pointer);
        return;
    }
    std::free(pointer);
}

void* tls_realloc(void* pointer, size_t size, const char* file, int line) {
    if (pointer == nullptr) return tls_malloc(size, file, line);
    SlotArena* slots = arena.load(std::memory_order_acquire);
    if (slots == nullptr || !slots->owns(pointer)) return std::realloc(pointer, size);
    if (size == 0) {
        slots->release(pointer);
        return nullptr;
    }
    if (size <= slots->slot_size()) return pointer;
    void* moved = std::malloc(size);
    if (moved == nullptr) return nullptr; // the slot stays the caller's, as realloc leaves it
    std::memcpy(moved, pointer, slots->slot_size());
    slots->release(pointer);
    return moved;
}

} // namespace

bool install_tls_memory() {
    // Their leak checks cannot see pointers held inside the arena's slots.
    if (kSanitizerBuild) return false;
    if (installed) return true;
    if (CRYPTO_set_mem_functions(tls_malloc, tls_realloc, tls_free) == 0) return false;
    installed = true;
    return true;
}

void size_tls_memory(SSL_CTX* context) {
    if (!installed || context == nullptr) return;
    static std::once_flag once;
    std::call_once(once, [context] {
        probing = true;
        probed_size = 0;
        SSL* ssl = SSL_new(context);
        probing = false;
        if (ssl == nullptr) return;
        SSL_free(ssl);
        // No SSL above the floor (another OpenSSL version): no arena, and the
        // functions only pass requests on to malloc.
        if (probed_size > kArenaFloor)
            arena.store(new SlotArena(probed_size, kArenaSlots), // NOLINT: kept for the process
                        std::memory_order_release);
    });
}

size_t tls_memory_slot_size() {
    SlotArena* slots = arena.load(std::memory_order_acquire);
    return slots != nullptr ? slots->slot_size() : 0;
}

size_t tls_memory_slots_in_use() {
    SlotArena* slots = arena.load(std::memory_order_acquire);
    return slots != nullptr ? slots->slots_in_use() : 0;
}

} // namespace lepus
