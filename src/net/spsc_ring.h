// SpscRing: a bounded lock-free queue between exactly one producer thread and
// one consumer thread. The acceptor hands accepted sockets to each reactor
// through one of these, so the hand-off costs two cache misses at worst and
// never a lock or a system call.
//
// Threads: try_push() only on the producer thread, try_pop() only on the
// consumer thread; capacity(), size_approx() and empty_approx() on either.
// Construction and destruction must not race with either side.
//
// Design (as in Vyukov's and Rigtorp's SPSC queues): indices grow without
// wrapping (a 64-bit counter does not overflow in practice) and are masked into
// a power-of-two array. The producer's index and the consumer's index live on
// separate cache lines, and each side keeps a private copy of the other's
// index, refreshed only when the ring looks full (producer) or empty
// (consumer), so in steady state neither side touches the other's line.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <utility>

namespace lepus {

template <typename T> class SpscRing {
public:
    // Capacity is rounded up to a power of two (at least 1).
    explicit SpscRing(size_t capacity)
        : mask_(std::bit_ceil(capacity < 1 ? size_t(1) : capacity) - 1),
          slots_(std::make_unique<T[]>(mask_ + 1)) {}
    SpscRing(const SpscRing&) = delete;
    SpscRing& operator=(const SpscRing&) = delete;

    // Producer only: copies `value` in; false when the ring is full.
    bool try_push(const T& value);
    // Consumer only: moves the oldest value into `out`; false when the ring is empty.
    bool try_pop(T& out);

    // Any thread: the number of slots.
    size_t capacity() const { return mask_ + 1; }
    // Any thread: the number of queued values at some recent instant.
    size_t size_approx() const;
    // Any thread: whether the ring was empty at some recent instant.
    bool empty_approx() const { return size_approx() == 0; }

private:
    static constexpr size_t kCacheLine = 64;

    // Read-only after construction: shared by both sides without contention.
    const size_t mask_;
    const std::unique_ptr<T[]> slots_;

    // Consumer's line: its own index and its cached view of the producer's.
    alignas(kCacheLine) std::atomic<size_t> head_{0};
    size_t cached_tail_ = 0;

    // Producer's line: its own index and its cached view of the consumer's.
    alignas(kCacheLine) std::atomic<size_t> tail_{0};
    size_t cached_head_ = 0;
    // alignas(kCacheLine) also rounds sizeof up to a whole line, so whatever
    // follows this object in memory stays off the producer's line.
};

template <typename T> bool SpscRing<T>::try_push(const T& value) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - cached_head_ > mask_) {
        // Acquire pairs with the consumer's release in try_pop: the slot it
        // freed has been read before we overwrite it.
        cached_head_ = head_.load(std::memory_order_acquire);
        if (tail - cached_head_ > mask_) return false;
    }
    slots_[tail & mask_] = value;
    // Release publishes the slot's contents together with the new index.
    tail_.store(tail + 1, std::memory_order_release);
    return true;
}

template <typename T> bool SpscRing<T>::try_pop(T& out) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head == cached_tail_) {
        // Acquire pairs with the producer's release in try_push.
        cached_tail_ = tail_.load(std::memory_order_acquire);
        if (head == cached_tail_) return false;
    }
    out = std::move(slots_[head & mask_]);
    head_.store(head + 1, std::memory_order_release);
    return true;
}

template <typename T> size_t SpscRing<T>::size_approx() const {
    // Head first: it only grows and never passes tail, so a tail read after it
    // is never behind it and the difference cannot underflow.
    const size_t head = head_.load(std::memory_order_acquire);
    const size_t tail = tail_.load(std::memory_order_acquire);
    const size_t size = tail - head;
    return size > mask_ + 1 ? mask_ + 1 : size;
}

} // namespace lepus
