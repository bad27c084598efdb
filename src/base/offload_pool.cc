#include "base/offload_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace lepus {

OffloadPool::OffloadPool(size_t threads, size_t queue_limit)
    : thread_count_(threads ? threads : 1), queue_limit_(queue_limit) {}

OffloadPool::~OffloadPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        queue_.clear();
    }
    wake_.notify_all();
    for (std::thread& thread : threads_)
        thread.join();
}

bool OffloadPool::submit(std::function<void()> task) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || queue_.size() >= queue_limit_) return false;
        queue_.push_back(std::move(task));
        if (threads_.empty())
            for (size_t i = 0; i < thread_count_; ++i)
                threads_.emplace_back([this] { run(); });
    }
    wake_.notify_one();
    return true;
}

size_t OffloadPool::queued() {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

void OffloadPool::run() {
    // A lower priority than the reactors (Linux applies nice per thread): on
    // a busy machine, requests already let in are served before more
    // passwords are hashed. Raising one's own nice value needs no privilege.
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 5);
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            task = std::move(queue_.front());
            queue_.pop_front();
        }
        task();
    }
}

} // namespace lepus
