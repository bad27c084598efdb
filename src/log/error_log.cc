#include "log/error_log.h"

#include "base/clock.h"
#include "base/time_cache.h"
#include "log/async_logger.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <unistd.h>

namespace lepus {

constinit thread_local LogContext detail::t_log_context;

namespace {

std::atomic<AsyncLogger*> g_error_logger{nullptr};
std::atomic<int> g_max_level{int(LogLevel::Info)};

// One write(2) per line: lines from several threads do not interleave mid-line.
void write_line_to_stderr(const std::string& line) {
    size_t done = 0;
    while (done < line.size()) {
        ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return; // nowhere left to report a broken stderr
        done += size_t(n);
    }
}

void log_formatted(LogLevel level, const char* format, va_list args) {
    if (!log_enabled(level)) return;
    char stack[1024];
    va_list first;
    va_copy(first, args);
    int length = std::vsnprintf(stack, sizeof stack, format, first);
    va_end(first);
    std::string heap;
    std::string_view message;
    if (length < 0) {
        message = "(unformattable log message)";
    } else if (size_t(length) < sizeof stack) {
        message = {stack, size_t(length)};
    } else {
        heap.resize(size_t(length) + 1);
        std::vsnprintf(heap.data(), heap.size(), format, args);
        heap.resize(size_t(length));
        message = heap;
    }
    // Reused per thread: logging does not allocate once the line has been seen.
    thread_local std::string line, with_context;
    line.clear();
    if (detail::t_log_context.append != nullptr) {
        with_context.assign(message);
        while (!with_context.empty() && with_context.back() == '\n')
            with_context.pop_back();
        with_context.append(", ");
        detail::t_log_context.append(detail::t_log_context.data, with_context);
        message = with_context;
    }
    append_error_line(level, message, line);
    AsyncLogger* logger = g_error_logger.load(std::memory_order_acquire);
    if (logger != nullptr) {
        logger->append(line);
    } else {
        write_line_to_stderr(line);
    }
}

} // namespace

void set_error_log(AsyncLogger* logger, LogLevel max_level) {
    g_max_level.store(int(max_level), std::memory_order_relaxed);
    g_error_logger.store(logger, std::memory_order_release);
}

bool log_enabled(LogLevel level) {
    return int(level) <= g_max_level.load(std::memory_order_relaxed);
}

void append_error_line(LogLevel level, std::string_view message, std::string& out) {
    // The caller may or may not end its message with a newline; the line gets exactly one.
    while (!message.empty() && message.back() == '\n')
        message.remove_suffix(1);
    char ids[48];
    int ids_length = std::snprintf(ids, sizeof ids, "] %d#%d: ", int(::getpid()), int(::gettid()));
    out.append(cached_error_log_time(wall_seconds())); // "2026/11/22 12:34:56"
    out.append(" [");
    out.append(log_level_name(level));
    out.append(ids, size_t(ids_length));
    out.append(message);
    out.push_back('\n');
}

void log_message(LogLevel level, const char* format, ...) {
    va_list args;
    va_start(args, format);
    log_formatted(level, format, args);
    va_end(args);
}

#define LEPUS_DEFINE_LOG_FUNCTION(name, level)                                                     \
    void name(const char* format, ...) {                                                           \
        va_list args;                                                                              \
        va_start(args, format);                                                                    \
        log_formatted(level, format, args);                                                        \
        va_end(args);                                                                              \
    }

LEPUS_DEFINE_LOG_FUNCTION(log_error, LogLevel::Error)
LEPUS_DEFINE_LOG_FUNCTION(log_warn, LogLevel::Warn)
LEPUS_DEFINE_LOG_FUNCTION(log_info, LogLevel::Info)
LEPUS_DEFINE_LOG_FUNCTION(log_debug, LogLevel::Debug)

#undef LEPUS_DEFINE_LOG_FUNCTION

} // namespace lepus
