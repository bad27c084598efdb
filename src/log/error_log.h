// The process-wide error log: nginx-style lines
//   2026/11/22 12:34:56 [error] 1234#1235: message
// (local time, level, pid#tid). Until set_error_log() installs a logger the lines are
// written synchronously to stderr, so start-up errors are never lost.
#pragma once

#include "log/log_level.h"

#include <string>
#include <string_view>

namespace lepus {

class AsyncLogger;

// Sends error-log lines of level <= max_level to `logger` (nullptr: synchronously to
// stderr). The logger must outlive every thread that may still log: reset to nullptr first.
void set_error_log(AsyncLogger* logger, LogLevel max_level);

// True when a line of this level would be written; check it before costly formatting.
bool log_enabled(LogLevel level);

// Formats one line (printf-style, no trailing newline needed) and logs it at `level`.
// Thread-safe; not async-signal-safe.
void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// log_message() at a fixed level.
void log_error(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));

// What a line is about, as nginx's log handler adds it (", client: ..., server: ...,
// request: ..."): a function and its data, so nothing is formatted unless a line is written.
struct LogContext {
    void (*append)(const void* data, std::string& out) = nullptr;
    const void* data = nullptr;
};

// While alive, every line this thread logs ends with ", " and what `context` appends (an
// empty context adds nothing). Scopes nest: the innermost one speaks.
namespace detail {
// The calling thread's context (constinit: no TLS wrapper call on access).
extern constinit thread_local LogContext t_log_context;
} // namespace detail

class ScopedLogContext {
public:
    // Inline: the router sets one for every request.
    explicit ScopedLogContext(LogContext context) : previous_(detail::t_log_context) {
        detail::t_log_context = context;
    }
    ~ScopedLogContext() { detail::t_log_context = previous_; }
    ScopedLogContext(const ScopedLogContext&) = delete;
    ScopedLogContext& operator=(const ScopedLogContext&) = delete;

private:
    LogContext previous_;
};

// Appends one complete error-log line (prefix, message, '\n') to `out`; the logger uses it
// for its own notices, which must not go back through log_message().
void append_error_line(LogLevel level, std::string_view message, std::string& out);

} // namespace lepus
