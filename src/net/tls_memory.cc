#include "net/tls_memory.h"

#include "base/slot_arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <openssl/crypto.h>
#include <openssl/ssl.h>

namespace lepus {

namespace {

// Requests above this are rounded up to 8 KiB by tcmalloc; below it, its
// classes are within 1 KiB of each other and an exact slot would save little.
constexpr size_t kArenaFloor = size_t{7} * 1024;
// Address space for this many connections' SSL objects (7.3 GiB reserved,
// resident only as used); beyond them, SSL objects come from malloc again.
constexpr size_t kArenaSlots = size_t{1} << 20;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

SlotArena* arena = nullptr; // set once, before any other thread starts
// While install_tls_memory() makes a throwaway SSL: the largest request above
// the floor, which is the SSL itself.
bool probing = false;
size_t probed_size = 0;

bool in_arena_range(size_t size) {
    return arena != nullptr && size > kArenaFloor && size <= arena->slot_size();
}

void* tls_malloc(size_t size, const char* /*file*/, int /*line*/) {
    if (probing && size > kArenaFloor) probed_size = std::max(probed_size, size);
    if (in_arena_range(size)) {
        if (void* slot = arena->allocate()) return slot;
    }
    return std::malloc(size);
}

void tls_free(void* pointer, const char* /*file*/, int /*line*/) {
    if (arena != nullptr && arena->owns(pointer)) {
        arena->release(pointer);
        return;
    }
    std::free(pointer);
}

void* tls_realloc(void* pointer, size_t size, const char* file, int line) {
    if (pointer == nullptr) return tls_malloc(size, file, line);
    if (arena == nullptr || !arena->owns(pointer)) return std::realloc(pointer, size);
    if (size == 0) {
        arena->release(pointer);
        return nullptr;
    }
    if (size <= arena->slot_size()) return pointer;
    void* moved = std::malloc(size);
    if (moved == nullptr) return nullptr; // the slot stays the caller's, as realloc leaves it
    std::memcpy(moved, pointer, arena->slot_size());
    arena->release(pointer);
    return moved;
}

// The size OpenSSL asks for an SSL: one made from a throwaway context.
size_t probe_ssl_size() {
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    if (context == nullptr) return 0;
    probing = true;
    SSL* ssl = SSL_new(context);
    probing = false;
    SSL_free(ssl);
    SSL_CTX_free(context);
    return ssl != nullptr ? probed_size : 0;
}

} // namespace

bool install_tls_memory() {
    // Their leak checks cannot see pointers held inside the arena's slots.
    if (kSanitizerBuild) return false;
    static bool installed = false;
    if (installed) return true;
    if (CRYPTO_set_mem_functions(tls_malloc, tls_realloc, tls_free) == 0) return false;
    installed = true;
    const size_t ssl_size = probe_ssl_size();
    // No SSL above the floor (another OpenSSL version): no arena, and the
    // functions only pass requests on to malloc. Never deleted: OpenSSL frees
    // what it still holds in its own exit handler.
    if (ssl_size > kArenaFloor) arena = new SlotArena(ssl_size, kArenaSlots); // NOLINT
    return true;
}

size_t tls_memory_slot_size() {
    return arena != nullptr ? arena->slot_size() : 0;
}

size_t tls_memory_slots_in_use() {
    return arena != nullptr ? arena->slots_in_use() : 0;
}

} // namespace lepus
