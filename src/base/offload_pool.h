// OffloadPool: a few threads for work that must never run on a reactor
// because it blocks or burns CPU for milliseconds (a bcrypt check costs tens
// of them). Tasks run in submission order; the queue is bounded, so a flood
// is refused at once instead of piling up. How a result gets back to its
// reactor is the task's business (net/reactor.h: Reactor::post).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lepus {

class OffloadPool {
public:
    // Threads are started by the first submit(), so a process that never
    // needs them (or forks before) has none.
    OffloadPool(size_t threads, size_t queue_limit);
    // Waits for the running tasks; queued ones are dropped, never run.
    ~OffloadPool();
    OffloadPool(const OffloadPool&) = delete;
    OffloadPool& operator=(const OffloadPool&) = delete;

    // Any thread: queues `task`; false (task dropped) when the queue is full.
    bool submit(std::function<void()> task);
    // Tasks waiting (for tests and the status of a flood).
    size_t queued();

private:
    void run();

    const size_t thread_count_, queue_limit_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> queue_;
    std::vector<std::thread> threads_;
    bool stopping_ = false;
};

} // namespace lepus
