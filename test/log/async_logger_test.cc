#include "log/async_logger.h"
#include "log_test_support.h"

#include <atomic>
#include <cstdio>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

using test::read_file;
using test::read_lines;
using test::TempDir;

// "thread=3 seq=17 ...padding...\n": long enough that a small buffer fills every few lines.
std::string numbered_line(int thread, uint64_t seq) {
    char text[128];
    int n = std::snprintf(text, sizeof text, "thread=%d seq=%llu the quick brown fox jumps\n",
                          thread, static_cast<unsigned long long>(seq));
    return std::string(text, size_t(n));
}

// Checks that `lines` hold, for each thread t, exactly the sequence 0..expected[t]-1 in
// order, and nothing else.
void expect_each_line_once_in_order(const std::vector<std::string>& lines,
                                    const std::vector<uint64_t>& expected) {
    std::vector<uint64_t> next(expected.size(), 0);
    for (const std::string& line : lines) {
        int thread = -1;
        unsigned long long seq = 0;
        ASSERT_EQ(std::sscanf(line.c_str(), "thread=%d seq=%llu", &thread, &seq), 2)
            << "unexpected line: " << line;
        ASSERT_GE(thread, 0);
        ASSERT_LT(size_t(thread), expected.size());
        ASSERT_EQ(seq, next[size_t(thread)]) << "thread " << thread << " out of order or twice";
        ++next[size_t(thread)];
    }
    EXPECT_EQ(next, expected);
}

std::vector<std::string> lines_matching(const std::vector<std::string>& lines,
                                        const std::string& prefix) {
    std::vector<std::string> result;
    for (const std::string& line : lines) {
        if (line.rfind(prefix, 0) == 0) result.push_back(line);
    }
    return result;
}

TEST(AsyncLogger, ConcurrentWritersLoseAndDuplicateNothing) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    constexpr int kThreads = 8;
    constexpr uint64_t kLinesPerThread = 20000;
    // A small buffer forces thousands of swaps; the queue is unbounded so nothing is dropped.
    AsyncLogger logger({.path = path,
                        .buffer_size = 4096,
                        .max_queued_buffers = 1u << 20,
                        .flush_interval_ms = 5});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
        writers.emplace_back([&logger, t] {
            for (uint64_t i = 0; i < kLinesPerThread; ++i)
                logger.append(numbered_line(t, i));
        });
    }
    for (std::thread& writer : writers)
        writer.join();
    logger.stop();

    EXPECT_EQ(logger.dropped_lines(), 0u);
    EXPECT_EQ(logger.written_lines(), kThreads * kLinesPerThread);
    expect_each_line_once_in_order(read_lines(path),
                                   std::vector<uint64_t>(kThreads, kLinesPerThread));
}

TEST(AsyncLogger, ReopenAfterRenameSplitsLinesBetweenOldAndNewFile) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    const std::string rotated = dir.file("access.log.1");
    constexpr int kThreads = 4;
    constexpr uint64_t kMinLinesPerThread = 5000;
    AsyncLogger logger({.path = path,
                        .buffer_size = 4096,
                        .max_queued_buffers = 1u << 20,
                        .flush_interval_ms = 5});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;

    std::atomic<uint64_t> appended{0};
    std::atomic<bool> rotated_and_more{false};
    std::vector<uint64_t> counts(kThreads, 0);
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
        writers.emplace_back([&, t] {
            uint64_t i = 0;
            // Writing goes on until the main thread has renamed, reopened and seen more
            // lines come in, so the rotation happens in the middle of the traffic.
            while (i < kMinLinesPerThread || !rotated_and_more.load()) {
                logger.append(numbered_line(t, i++));
                appended.fetch_add(1);
            }
            counts[size_t(t)] = i;
        });
    }
    while (appended.load() < kThreads * kMinLinesPerThread / 2)
        std::this_thread::yield();
    logger.append("main before rotation\n");
    ASSERT_EQ(std::rename(path.c_str(), rotated.c_str()), 0);
    logger.reopen();
    logger.append("main after rotation\n");
    const uint64_t at_reopen = appended.load();
    while (appended.load() < at_reopen + 1000)
        std::this_thread::yield();
    rotated_and_more = true;
    for (std::thread& writer : writers)
        writer.join();
    logger.stop();

    std::vector<std::string> old_lines = read_lines(rotated);
    std::vector<std::string> new_lines = read_lines(path);
    // reopen() is ordered with append(): what came before it is in the old file, after in
    // the new one.
    EXPECT_EQ(lines_matching(old_lines, "main "), std::vector<std::string>{"main before rotation"});
    EXPECT_EQ(lines_matching(new_lines, "main "), std::vector<std::string>{"main after rotation"});

    std::vector<std::string> all;
    for (auto* part : {&old_lines, &new_lines}) {
        for (std::string& line : *part) {
            if (line.rfind("main ", 0) != 0) all.push_back(std::move(line));
        }
    }
    expect_each_line_once_in_order(all, counts);
    EXPECT_EQ(logger.dropped_lines(), 0u);
}

TEST(AsyncLogger, ReopenFailureKeepsWritingToTheOldFile) {
    TempDir dir;
    ASSERT_EQ(::mkdir(dir.file("logs").c_str(), 0755), 0);
    AsyncLogger logger({.path = dir.file("logs/error.log")});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    logger.append("first\n");
    // The directory disappears from under the path: the new open fails.
    ASSERT_EQ(std::rename(dir.file("logs").c_str(), dir.file("moved").c_str()), 0);
    test::StderrCapture capture(dir.file("stderr"));
    logger.reopen();
    logger.append("second\n");
    logger.stop();
    const std::string reported = capture.finish();

    EXPECT_EQ(read_lines(dir.file("moved/error.log")),
              (std::vector<std::string>{"first", "second"}));
    EXPECT_NE(reported.find("reopen() log file"), std::string::npos) << reported;
    EXPECT_EQ(logger.dropped_lines(), 0u);
}

TEST(AsyncLogger, StalledBackEndDropsWholeBuffersAndSaysSo) {
    TempDir dir;
    const std::string fifo = dir.file("fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // A reader must exist for the logger's open(O_WRONLY) not to block; it reads nothing
    // until all lines are appended, so the back-end is stuck in write() on a full pipe.
    UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(reader);
    AsyncLogger logger(
        {.path = fifo, .buffer_size = 4096, .max_queued_buffers = 2, .flush_interval_ms = 5});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;

    // 20000 lines are ~900 KB: far more than a pipe (64 KiB) plus three 4 KiB buffers can
    // hold. Reaching the end of this loop is the proof that append() did not wait.
    constexpr uint64_t kLines = 20000;
    for (uint64_t i = 0; i < kLines; ++i)
        logger.append(numbered_line(0, i));
    EXPECT_GT(logger.dropped_lines(), 0u);

    ASSERT_EQ(::fcntl(reader.get(), F_SETFL, 0), 0);
    std::string received;
    std::thread drain([&] {
        char chunk[65536];
        ssize_t n;
        while ((n = ::read(reader.get(), chunk, sizeof chunk)) > 0)
            received.append(chunk, n);
    });
    logger.stop(); // closes the write end: the reader sees EOF
    drain.join();

    std::vector<std::string> data;
    uint64_t announced = 0;
    const std::regex notice(R"(\[warn\] \d+#\d+: log ".*" fell behind: dropped (\d+) lines$)");
    for (const std::string& line : test::split_lines(received)) {
        std::smatch match;
        if (std::regex_search(line, match, notice)) {
            announced += std::stoull(match[1].str());
        } else {
            data.push_back(line);
        }
    }
    EXPECT_GT(announced, 0u);
    EXPECT_EQ(announced, logger.dropped_lines());
    EXPECT_EQ(data.size(), logger.written_lines());
    EXPECT_EQ(logger.written_lines() + logger.dropped_lines(), kLines);
    // What survived is still in order, each line once.
    uint64_t previous = 0;
    bool first = true;
    for (const std::string& line : data) {
        int thread = -1;
        unsigned long long seq = 0;
        ASSERT_EQ(std::sscanf(line.c_str(), "thread=%d seq=%llu", &thread, &seq), 2) << line;
        if (!first) {
            ASSERT_GT(seq, previous);
        }
        previous = seq;
        first = false;
    }
}

TEST(AsyncLogger, StopFlushesLinesAppendedJustBefore) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    // Neither the interval nor a full buffer would trigger a write: only stop() does.
    AsyncLogger logger({.path = path, .flush_interval_ms = 3600 * 1000});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    constexpr uint64_t kLines = 10000;
    for (uint64_t i = 0; i < kLines; ++i)
        logger.append(numbered_line(0, i));
    logger.stop();
    EXPECT_EQ(logger.written_lines(), kLines);
    expect_each_line_once_in_order(read_lines(path), {kLines});

    logger.stop(); // idempotent
    logger.append("after stop\n");
    EXPECT_EQ(logger.dropped_lines(), 1u);
    EXPECT_EQ(read_lines(path).size(), kLines);
}

TEST(AsyncLogger, DestructorFlushes) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    {
        AsyncLogger logger({.path = path, .flush_interval_ms = 3600 * 1000});
        std::string error;
        ASSERT_TRUE(logger.start(error)) << error;
        logger.append("one\ntwo\n");
        logger.append("three\n");
    }
    EXPECT_EQ(read_lines(path), (std::vector<std::string>{"one", "two", "three"}));
}

TEST(AsyncLogger, LinesLongerThanABufferKeepTheirPlace) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    AsyncLogger logger({.path = path, .buffer_size = 256});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    const std::string long_line(1000, 'x');
    logger.append("before\n");
    logger.append(long_line + "\n");
    logger.append("after\n");
    logger.stop();
    EXPECT_EQ(read_lines(path), (std::vector<std::string>{"before", long_line, "after"}));
    EXPECT_EQ(logger.written_lines(), 3u);
}

TEST(AsyncLogger, OffIsDisabledAndCreatesNothing) {
    TempDir dir;
    const std::string cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.path()); // a file named "off" would appear here
    {
        AsyncLogger logger({.path = "off"});
        EXPECT_FALSE(logger.enabled());
        std::string error;
        EXPECT_TRUE(logger.start(error));
        logger.append("nothing\n");
        logger.reopen();
        logger.stop();
        EXPECT_EQ(logger.written_lines(), 0u);
        EXPECT_EQ(logger.dropped_lines(), 0u);
    }
    std::filesystem::current_path(cwd);
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(AsyncLogger, DashWritesToStderr) {
    TempDir dir;
    test::StderrCapture capture(dir.file("stderr"));
    AsyncLogger logger({.path = "-"});
    EXPECT_TRUE(logger.enabled());
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    logger.append("to stderr 1\n");
    logger.reopen(); // meaningless for stderr, must not disturb it
    logger.append("to stderr 2\n");
    logger.stop();
    EXPECT_EQ(test::split_lines(capture.finish()),
              (std::vector<std::string>{"to stderr 1", "to stderr 2"}));
}

TEST(AsyncLogger, StartFailsWithAMessageOnAnUnwritablePath) {
    TempDir dir;
    const std::string missing = dir.file("no-such-dir/access.log");
    AsyncLogger in_missing_dir({.path = missing});
    std::string error;
    EXPECT_FALSE(in_missing_dir.start(error));
    EXPECT_NE(error.find(missing), std::string::npos) << error;
    EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
    in_missing_dir.append("dropped\n"); // harmless on a logger that never started
    in_missing_dir.stop();

    // A directory cannot be opened for writing, even by root.
    AsyncLogger on_directory({.path = dir.path()});
    error.clear();
    EXPECT_FALSE(on_directory.start(error));
    EXPECT_NE(error.find("Is a directory"), std::string::npos) << error;
}

TEST(AsyncLogger, WriteErrorsCountAsDroppedAndAreReportedOnce) {
    TempDir dir;
    test::StderrCapture capture(dir.file("stderr"));
    // Every write to /dev/full fails with ENOSPC: a full disk, for real.
    AsyncLogger logger({.path = "/dev/full", .buffer_size = 256, .flush_interval_ms = 1});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    for (int i = 0; i < 100; ++i)
        logger.append(numbered_line(0, uint64_t(i)));
    logger.stop();
    const std::string reported = capture.finish();

    EXPECT_EQ(logger.written_lines(), 0u);
    EXPECT_EQ(logger.dropped_lines(), 100u);
    const std::string message = "write() to log \"/dev/full\" failed";
    const size_t first = reported.find(message);
    ASSERT_NE(first, std::string::npos) << reported;
    EXPECT_NE(reported.find("No space left on device"), std::string::npos) << reported;
    EXPECT_EQ(reported.find(message, first + 1), std::string::npos) << "reported twice";
}

TEST(AsyncLogger, FlushIntervalWritesWithoutStop) {
    TempDir dir;
    const std::string path = dir.file("access.log");
    AsyncLogger logger({.path = path, .flush_interval_ms = 10});
    std::string error;
    ASSERT_TRUE(logger.start(error)) << error;
    logger.append("soon on disk\n");
    // No timing assumption: wait for the write however long it takes.
    while (logger.written_lines() == 0)
        std::this_thread::yield();
    EXPECT_EQ(read_lines(path), std::vector<std::string>{"soon on disk"});
}

} // namespace
} // namespace lepus
