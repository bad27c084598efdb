// liblepus_alloc_counter.so: an LD_PRELOAD shim that counts every allocation a
// process makes, for bench/allocations_per_request.sh and test/e2e/allocations_test.py.
//
// It interposes malloc, calloc, realloc, reallocarray, aligned_alloc, posix_memalign,
// memalign, valloc, pvalloc and every operator new, and forwards each to the next
// definition (dlsym RTLD_NEXT): tcmalloc's in the release binary, glibc's otherwise.
// tcmalloc defines its own operator new that does not call malloc, so new is
// interposed as well; where new does call malloc (libstdc++ without tcmalloc) the
// inner malloc is not counted twice.
//
// The counters live in a file mapped MAP_SHARED, named by LEPUS_ALLOC_COUNTS, so a
// script reads them while the process runs (before/after snapshots, no signal: lepus
// blocks its signals for its own signalfd). The layout is `SharedCounters` below;
// test/alloc/alloc_counts.py reads it. Without LEPUS_ALLOC_COUNTS the totals are
// printed to stderr at exit.
//
// Writing a nonzero N into `trace_remaining` of the file makes the next N counted
// allocations append a backtrace to the file named by LEPUS_ALLOC_TRACE, one frame per
// line as "object+0xoffset" (resolve with addr2line -f -i -C -e object offset).
//
// Sanitizer builds replace malloc themselves (and ASan refuses to start when
// another library is preloaded before it): do not use the shim with them.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <malloc.h>
#include <new>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT extern "C" __attribute__((visibility("default")))
// Initial-exec TLS: the general-dynamic model may call malloc on first access.
#define TLS __attribute__((tls_model("initial-exec"))) thread_local

namespace {

// What was called; the index into SharedCounters::calls.
enum Kind : unsigned {
    kMalloc,
    kCalloc,
    kRealloc,
    kAligned, // aligned_alloc, posix_memalign, memalign, valloc, pvalloc
    kNew,     // every operator new and new[]
    kFree,    // free and the plain and sized operator deletes (not in the allocation total)
    kKinds
};

constexpr uint64_t kMagic = 0x314f4c4c41504c45; // "ELPALLO1" little-endian
constexpr unsigned kMaxThreads = 256;

struct ThreadSlot {
    std::atomic<int32_t> tid;
    uint32_t pad;
    std::atomic<uint64_t> allocations; // everything but kFree
};

// The file's layout (little-endian, 8-byte fields). Readers check magic.
struct SharedCounters {
    uint64_t magic;
    std::atomic<uint64_t> calls[kKinds];
    std::atomic<uint64_t> trace_remaining; // written by the reader to ask for backtraces
    std::atomic<uint64_t> threads_used;
    std::atomic<uint64_t> threads_dropped; // threads beyond kMaxThreads (counted in calls only)
    ThreadSlot threads[kMaxThreads];
};

static_assert(sizeof(std::atomic<uint64_t>) == 8 && offsetof(SharedCounters, calls) == 8 &&
                  offsetof(SharedCounters, trace_remaining) == 56 &&
                  offsetof(SharedCounters, threads) == 80 && sizeof(ThreadSlot) == 16 &&
                  sizeof(SharedCounters) == 80 + 16 * kMaxThreads,
              "alloc_counts.py reads this layout");

// Counts land here until the shared file is mapped (and for good without one).
SharedCounters local_counters;
SharedCounters* counters = &local_counters;
int trace_fd = -1;

TLS int thread_slot = -1;
TLS int depth = 0; // > 0 while inside the shim: nested calls are the shim's own

using MallocFn = void* (*)(size_t);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using ReallocArrayFn = void* (*)(void*, size_t, size_t);
using FreeFn = void (*)(void*);
using AlignedAllocFn = void* (*)(size_t, size_t);
using PosixMemalignFn = int (*)(void**, size_t, size_t);
using NewFn = void* (*)(size_t);
using NewNothrowFn = void* (*)(size_t, const std::nothrow_t&);
using NewAlignFn = void* (*)(size_t, std::align_val_t);
using NewAlignNothrowFn = void* (*)(size_t, std::align_val_t, const std::nothrow_t&);
using DeleteFn = void (*)(void*);

struct Next {
    MallocFn malloc;
    CallocFn calloc;
    ReallocFn realloc;
    ReallocArrayFn reallocarray;
    FreeFn free;
    AlignedAllocFn aligned_alloc;
    PosixMemalignFn posix_memalign;
    AlignedAllocFn memalign;
    MallocFn valloc;
    MallocFn pvalloc;
    NewFn new_;
    NewFn new_array;
    NewNothrowFn new_nothrow;
    NewNothrowFn new_array_nothrow;
    NewAlignFn new_align;
    NewAlignFn new_array_align;
    NewAlignNothrowFn new_align_nothrow;
    NewAlignNothrowFn new_array_align_nothrow;
    DeleteFn delete_;
    DeleteFn delete_array;
};
Next next;
std::atomic<int> resolved{0}; // 0 not yet, 1 resolving, 2 done

// dlsym may calloc (its error buffer) while we resolve: serve it from here.
alignas(64) char bootstrap_heap[16384];
std::atomic<size_t> bootstrap_used{0};

void* bootstrap_alloc(size_t size) {
    size = (size + 63) & ~size_t(63);
    size_t offset = bootstrap_used.fetch_add(size);
    if (offset + size > sizeof bootstrap_heap) return nullptr;
    return bootstrap_heap + offset; // static storage is zeroed: fine for calloc
}

bool from_bootstrap(void* p) {
    return p >= static_cast<void*>(bootstrap_heap) &&
           p < static_cast<void*>(bootstrap_heap + sizeof bootstrap_heap);
}

template <typename T> void find(T& slot, const char* name) {
    slot = reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

void resolve() {
    int expected = 0;
    if (!resolved.compare_exchange_strong(expected, 1)) {
        while (resolved.load() != 2) {
        }
        return;
    }
    find(next.malloc, "malloc");
    find(next.calloc, "calloc");
    find(next.realloc, "realloc");
    find(next.reallocarray, "reallocarray");
    find(next.free, "free");
    find(next.aligned_alloc, "aligned_alloc");
    find(next.posix_memalign, "posix_memalign");
    find(next.memalign, "memalign");
    find(next.valloc, "valloc");
    find(next.pvalloc, "pvalloc");
    find(next.new_, "_Znwm");
    find(next.new_array, "_Znam");
    find(next.new_nothrow, "_ZnwmRKSt9nothrow_t");
    find(next.new_array_nothrow, "_ZnamRKSt9nothrow_t");
    find(next.new_align, "_ZnwmSt11align_val_t");
    find(next.new_array_align, "_ZnamSt11align_val_t");
    find(next.new_align_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t");
    find(next.new_array_align_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t");
    find(next.delete_, "_ZdlPv");
    find(next.delete_array, "_ZdaPv");
    resolved.store(2);
}

// Writes text to the trace file without allocating.
void trace_write(const char* text, size_t length) {
    while (length > 0) {
        ssize_t written = write(trace_fd, text, length);
        if (written <= 0) return;
        text += written;
        length -= size_t(written);
    }
}

size_t append_hex(char* out, uintptr_t value) {
    char digits[2 * sizeof value];
    size_t count = 0;
    do {
        digits[count++] = "0123456789abcdef"[value & 15];
        value >>= 4;
    } while (value);
    for (size_t i = 0; i < count; ++i)
        out[i] = digits[count - 1 - i];
    return count;
}

size_t append_text(char* out, const char* text) {
    size_t length = strlen(text);
    memcpy(out, text, length);
    return length;
}

const char* const kKindNames[kKinds] = {"malloc", "calloc", "realloc", "aligned", "new", "free"};

// One record: "@ kind size=0x.. tid=0x..", then "object+0xoffset" per frame.
// Return addresses are reported minus one so addr2line names the call's line.
void trace(Kind kind, size_t size) {
    void* frames[48];
    int count = backtrace(frames, 48);
    char line[4096];
    size_t n = append_text(line, "@ ");
    n += append_text(line + n, kKindNames[kind]);
    n += append_text(line + n, " size=0x");
    n += append_hex(line + n, size);
    n += append_text(line + n, " tid=0x");
    n += append_hex(line + n, uintptr_t(syscall(SYS_gettid)));
    line[n++] = '\n';
    trace_write(line, n);
    for (int i = 2; i < count; ++i) { // 0 is trace(), 1 is count()
        uintptr_t address = reinterpret_cast<uintptr_t>(frames[i]) - 1;
        Dl_info info{};
        n = 0;
        if (dladdr(frames[i], &info) && info.dli_fname && info.dli_fname[0]) {
            size_t name = strlen(info.dli_fname);
            if (name > sizeof line - 64) name = sizeof line - 64;
            memcpy(line, info.dli_fname, name);
            n = name;
            n += append_text(line + n, "+0x");
            n += append_hex(line + n, address - reinterpret_cast<uintptr_t>(info.dli_fbase));
        } else {
            n += append_text(line, "?+0x");
            n += append_hex(line + n, address);
        }
        line[n++] = '\n';
        trace_write(line, n);
    }
}

// Counts one call (the caller has already excluded the shim's own nested calls).
void count(Kind kind, size_t size) {
    SharedCounters* c = counters;
    c->calls[kind].fetch_add(1, std::memory_order_relaxed);
    if (kind == kFree) return;
    if (thread_slot < 0) {
        uint64_t slot = c->threads_used.fetch_add(1, std::memory_order_relaxed);
        if (slot < kMaxThreads) {
            thread_slot = int(slot);
            c->threads[slot].tid.store(int32_t(syscall(SYS_gettid)), std::memory_order_relaxed);
        } else {
            thread_slot = int(kMaxThreads);
            c->threads_dropped.fetch_add(1, std::memory_order_relaxed);
        }
    }
    if (thread_slot < int(kMaxThreads))
        c->threads[thread_slot].allocations.fetch_add(1, std::memory_order_relaxed);
    if (trace_fd >= 0 && c->trace_remaining.load(std::memory_order_relaxed) > 0) {
        uint64_t left = c->trace_remaining.load(std::memory_order_relaxed);
        while (left > 0 && !c->trace_remaining.compare_exchange_weak(left, left - 1)) {
        }
        if (left > 0) trace(kind, size);
    }
}

// RAII depth guard: calls made while one is alive are not counted.
struct Inside {
    bool outermost;
    Inside() : outermost(depth++ == 0) {}
    ~Inside() { --depth; }
};

void ensure_resolved() {
    if (resolved.load(std::memory_order_acquire) != 2) resolve();
}

// Maps the counters file named by LEPUS_ALLOC_COUNTS and moves the counts so far
// into it. Runs in the constructor, before lepus's main().
__attribute__((constructor)) void start() {
    Inside inside;
    ensure_resolved();
    const char* trace_path = getenv("LEPUS_ALLOC_TRACE");
    if (trace_path && *trace_path) {
        trace_fd = open(trace_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        void* frames[4];
        backtrace(frames, 4); // loads libgcc_s now, not during a traced call
    }
    const char* path = getenv("LEPUS_ALLOC_COUNTS");
    if (!path || !*path) return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(SharedCounters)) != 0) {
        dprintf(2, "alloc_counter: cannot create %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    void* mapping =
        mmap(nullptr, sizeof(SharedCounters), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mapping == MAP_FAILED) {
        dprintf(2, "alloc_counter: cannot map %s: %s\n", path, strerror(errno));
        return;
    }
    auto* shared = static_cast<SharedCounters*>(mapping);
    for (unsigned k = 0; k < kKinds; ++k)
        shared->calls[k].store(local_counters.calls[k].load());
    uint64_t used = local_counters.threads_used.load();
    shared->threads_used.store(used);
    shared->threads_dropped.store(local_counters.threads_dropped.load());
    for (uint64_t i = 0; i < used && i < kMaxThreads; ++i) {
        shared->threads[i].tid.store(local_counters.threads[i].tid.load());
        shared->threads[i].allocations.store(local_counters.threads[i].allocations.load());
    }
    shared->magic = kMagic; // last: a reader seeing it sees a complete file
    counters = shared;
}

__attribute__((destructor)) void finish() {
    if (counters != &local_counters) return; // the file holds the counts
    const SharedCounters& c = *counters;
    dprintf(2, "alloc_counter: malloc %lu calloc %lu realloc %lu aligned %lu new %lu free %lu\n",
            (unsigned long)c.calls[kMalloc].load(), (unsigned long)c.calls[kCalloc].load(),
            (unsigned long)c.calls[kRealloc].load(), (unsigned long)c.calls[kAligned].load(),
            (unsigned long)c.calls[kNew].load(), (unsigned long)c.calls[kFree].load());
}

// Wraps one forwarded call: resolves, counts the outermost call, guards nesting.
#define COUNTED(kind, size)                                                                        \
    Inside inside;                                                                                 \
    if (resolved.load(std::memory_order_acquire) != 2) {                                           \
        if (resolved.load() == 1) return bootstrap_alloc(size);                                    \
        resolve();                                                                                 \
    }                                                                                              \
    if (inside.outermost) count(kind, size);

} // namespace

EXPORT void* malloc(size_t size) {
    COUNTED(kMalloc, size);
    return next.malloc(size);
}

EXPORT void* calloc(size_t count_, size_t size) {
    COUNTED(kCalloc, count_ * size);
    return next.calloc(count_, size);
}

EXPORT void* realloc(void* p, size_t size) {
    if (from_bootstrap(p)) {
        void* moved = malloc(size);
        size_t available = size_t(bootstrap_heap + sizeof bootstrap_heap - static_cast<char*>(p));
        if (moved) memcpy(moved, p, size < available ? size : available);
        return moved;
    }
    COUNTED(kRealloc, size);
    return next.realloc(p, size);
}

EXPORT void* reallocarray(void* p, size_t count_, size_t size) {
    COUNTED(kRealloc, count_ * size);
    return next.reallocarray(p, count_, size);
}

EXPORT void free(void* p) {
    if (!p || from_bootstrap(p)) return;
    ensure_resolved();
    Inside inside;
    if (inside.outermost) count(kFree, 0);
    next.free(p);
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) {
    COUNTED(kAligned, size);
    return next.aligned_alloc(alignment, size);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
    ensure_resolved();
    Inside inside;
    if (inside.outermost) count(kAligned, size);
    return next.posix_memalign(out, alignment, size);
}

EXPORT void* memalign(size_t alignment, size_t size) {
    COUNTED(kAligned, size);
    return next.memalign(alignment, size);
}

EXPORT void* valloc(size_t size) {
    COUNTED(kAligned, size);
    return next.valloc(size);
}

EXPORT void* pvalloc(size_t size) {
    COUNTED(kAligned, size);
    return next.pvalloc(size);
}

// Every replaceable operator new and new[], and the plain and sized deletes (for the
// free count). Each forwards to the next definition by its mangled name.
void* operator new(size_t size) {
    COUNTED(kNew, size);
    return next.new_(size);
}

void* operator new[](size_t size) {
    COUNTED(kNew, size);
    return next.new_array(size);
}

void* operator new(size_t size, const std::nothrow_t& tag) noexcept {
    COUNTED(kNew, size);
    return next.new_nothrow(size, tag);
}

void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
    COUNTED(kNew, size);
    return next.new_array_nothrow(size, tag);
}

void* operator new(size_t size, std::align_val_t alignment) {
    COUNTED(kNew, size);
    return next.new_align(size, alignment);
}

void* operator new[](size_t size, std::align_val_t alignment) {
    COUNTED(kNew, size);
    return next.new_array_align(size, alignment);
}

void* operator new(size_t size, std::align_val_t alignment, const std::nothrow_t& tag) noexcept {
    COUNTED(kNew, size);
    return next.new_align_nothrow(size, alignment, tag);
}

void* operator new[](size_t size, std::align_val_t alignment, const std::nothrow_t& tag) noexcept {
    COUNTED(kNew, size);
    return next.new_array_align_nothrow(size, alignment, tag);
}

namespace {
void counted_delete(DeleteFn forward, void* p) {
    if (!p || from_bootstrap(p)) return;
    ensure_resolved();
    Inside inside;
    if (inside.outermost) count(kFree, 0);
    forward(p);
}
} // namespace

void operator delete(void* p) noexcept {
    counted_delete(next.delete_, p);
}
void operator delete[](void* p) noexcept {
    counted_delete(next.delete_array, p);
}
// The sized forms go to the unsized ones: every allocator behind them accepts that.
void operator delete(void* p, size_t) noexcept {
    counted_delete(next.delete_, p);
}
void operator delete[](void* p, size_t) noexcept {
    counted_delete(next.delete_array, p);
}
