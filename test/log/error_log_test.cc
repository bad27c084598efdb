#include "log/async_logger.h"
#include "log/error_log.h"
#include "log_test_support.h"

#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

using test::read_lines;
using test::TempDir;

// Every test leaves the process-wide error log as it found it: stderr, level info.
class ErrorLog : public ::testing::Test {
protected:
    void TearDown() override { set_error_log(nullptr, LogLevel::Info); }
};

std::regex line_pattern(const std::string& level, const std::string& message) {
    return std::regex(R"(^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} \[)" + level + R"(\] )" +
                      std::to_string(::getpid()) + R"(#\d+: )" + message + "$");
}

TEST_F(ErrorLog, GoesToTheLoggerAndFiltersByLevel) {
    TempDir dir;
    const std::string path = dir.file("error.log");
    AsyncLogger logger({.path = path});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    set_error_log(&logger, LogLevel::Warn);
    EXPECT_TRUE(log_enabled(LogLevel::Error));
    EXPECT_TRUE(log_enabled(LogLevel::Warn));
    EXPECT_FALSE(log_enabled(LogLevel::Info));
    EXPECT_FALSE(log_enabled(LogLevel::Debug));

    log_error("accept() failed (%d: %s)", 24, "Too many open files");
    log_info("not written");
    log_debug("not written either");
    log_warn("trailing newline is not doubled\n");
    log_message(LogLevel::Error, "%s", "via log_message");
    set_error_log(nullptr, LogLevel::Info);
    logger.stop();

    std::vector<std::string> lines = read_lines(path);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_TRUE(std::regex_match(
        lines[0], line_pattern("error", R"(accept\(\) failed \(24: Too many open files\))")))
        << lines[0];
    EXPECT_TRUE(std::regex_match(lines[1], line_pattern("warn", "trailing newline is not doubled")))
        << lines[1];
    EXPECT_TRUE(std::regex_match(lines[2], line_pattern("error", "via log_message"))) << lines[2];
}

// Issue 33: a line logged inside a scope ends with the scope's context; scopes
// nest and restore the outer one; nothing is formatted for a line not written.
TEST_F(ErrorLog, ScopedContextIsAppendedToEachLine) {
    TempDir dir;
    const std::string path = dir.file("error.log");
    AsyncLogger logger({.path = path});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    set_error_log(&logger, LogLevel::Warn);
    auto append = [](const void* data, std::string& out) {
        out.append("client: ").append(static_cast<const char*>(data));
    };
    int calls = 0;
    LogContext counting{[](const void* data, std::string& out) {
                            ++*static_cast<int*>(const_cast<void*>(data));
                            out.append("counted");
                        },
                        &calls};
    log_error("before");
    {
        ScopedLogContext outer({append, "203.0.113.7"});
        log_error("connect() failed\n");
        {
            ScopedLogContext inner(counting);
            log_info("not written, not formatted");
            log_warn("inner");
        }
        log_warn("outer again");
    }
    log_error("after");
    set_error_log(nullptr, LogLevel::Info);
    logger.stop();

    EXPECT_EQ(calls, 1);
    std::vector<std::string> lines = read_lines(path);
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_TRUE(std::regex_match(lines[0], line_pattern("error", "before"))) << lines[0];
    EXPECT_TRUE(std::regex_match(
        lines[1], line_pattern("error", R"(connect\(\) failed, client: 203\.0\.113\.7)")))
        << lines[1];
    EXPECT_TRUE(std::regex_match(lines[2], line_pattern("warn", "inner, counted"))) << lines[2];
    EXPECT_TRUE(
        std::regex_match(lines[3], line_pattern("warn", R"(outer again, client: 203\.0\.113\.7)")))
        << lines[3];
    EXPECT_TRUE(std::regex_match(lines[4], line_pattern("error", "after"))) << lines[4];
}

TEST_F(ErrorLog, WithoutALoggerWritesToStderrSynchronously) {
    TempDir dir;
    test::StderrCapture capture(dir.file("stderr"));
    set_error_log(nullptr, LogLevel::Debug);
    log_debug("early %s", "start-up");
    std::vector<std::string> lines = test::split_lines(capture.finish());
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(std::regex_match(lines[0], line_pattern("debug", "early start-up"))) << lines[0];
}

TEST_F(ErrorLog, LongMessagesAreNotTruncated) {
    TempDir dir;
    test::StderrCapture capture(dir.file("stderr"));
    const std::string long_text(5000, 'y');
    log_error("%s|end", long_text.c_str());
    std::vector<std::string> lines = test::split_lines(capture.finish());
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(std::regex_match(lines[0], line_pattern("error", long_text + R"(\|end)")));
}

TEST_F(ErrorLog, ManyThreadsLogWholeLines) {
    TempDir dir;
    const std::string path = dir.file("error.log");
    AsyncLogger logger({.path = path, .buffer_size = 1024, .max_queued_buffers = 1u << 20});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    set_error_log(&logger, LogLevel::Info);
    constexpr int kThreads = 4;
    constexpr int kLines = 2000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t] {
            for (int i = 0; i < kLines; ++i)
                log_info("thread %d line %d", t, i);
        });
    }
    for (std::thread& thread : threads)
        thread.join();
    set_error_log(nullptr, LogLevel::Info);
    logger.stop();

    std::vector<std::string> lines = read_lines(path);
    ASSERT_EQ(lines.size(), size_t(kThreads * kLines));
    const std::regex pattern = line_pattern("info", R"(thread \d line \d+)");
    for (const std::string& line : lines)
        ASSERT_TRUE(std::regex_match(line, pattern)) << line;
}

} // namespace
} // namespace lepus
