// Http2Output: frames, copied file frames, sendfile segments and memory
// segments leave in order whatever the transport takes per call (down to one
// byte), bytes and memory segments in one writev, the bytes before a file
// segment with MSG_MORE, a segment keeps its file (and the memory it points
// into) until it is sent or dropped, and a file that shrinks ends the output
// instead of hanging. Then the same over a real non-blocking socketpair with
// PlainTransport's sendmsg and sendfile.
#include "http/http2_output.h"
#include "net/transport.h"
#include "support/temp_dir.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

// Takes at most `budget` bytes until the test refills it (then kIoAgain, as a
// full socket), and records the byte stream; send_file reads the file itself.
class ThrottledTransport final : public Transport {
public:
    ssize_t read(char*, size_t) override { return kIoAgain; }
    ssize_t writev(const iovec* iov, int count, bool more) override {
        if (budget == 0) return kIoAgain;
        size_t taken = 0;
        for (int i = 0; i < count && budget > 0; ++i) {
            size_t take = std::min(iov[i].iov_len, budget);
            received.append(static_cast<const char*>(iov[i].iov_base), take);
            budget -= take;
            taken += take;
        }
        last_more = more;
        ++writes;
        max_pieces = std::max(max_pieces, count);
        return ssize_t(taken);
    }
    ssize_t send_file(int file_fd, uint64_t offset, size_t length) override {
        if (budget == 0) return kIoAgain;
        more_before_file.push_back(last_more);
        std::string chunk(std::min(length, budget), '\0');
        ssize_t got = ::pread(file_fd, chunk.data(), chunk.size(), off_t(offset));
        if (got <= 0) return got < 0 ? kIoError : 0; // 0: the file ended early
        received.append(chunk.data(), size_t(got));
        budget -= size_t(got);
        return got;
    }
    void shutdown_write() override {}
    bool peer_left() override { return false; }
    int fd() const override { return -1; }

    std::string received;
    size_t budget = size_t(-1);
    bool last_more = false;
    int writes = 0;                     // writev calls that took bytes
    int max_pieces = 0;                 // the most iovecs one writev was given
    std::vector<bool> more_before_file; // the `more` of the writev before each send_file
};

class Http2OutputTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(dir_.ok());
        for (size_t i = 0; i < 300; ++i)
            contents_.push_back(char('a' + i % 26));
        path_ = dir_.file("data.bin");
        int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::write(fd, contents_.data(), contents_.size()), ssize_t(contents_.size()));
        auto* file = new CachedFile;
        file->rel_path = "data.bin";
        file->identity.fd = UniqueFd(fd);
        file->identity.data = contents_; // as the cache keeps a small file whole
        file->identity.in_memory = true;
        file_ = FileRef(file);
    }

    int fd() const { return file_->identity.fd.get(); }
    // Where bytes of the cached contents are: a memory segment's payload.
    const char* memory(size_t at) const { return file_->identity.data.data() + at; }
    std::string slice(size_t at, size_t length) const { return contents_.substr(at, length); }

    // Writes until Done, refilling the transport's budget at each Again.
    static Http2Output::Status drain(Http2Output& output, ThrottledTransport& transport,
                                     size_t budget) {
        for (int rounds = 0; rounds < 100000; ++rounds) {
            transport.budget = budget;
            Http2Output::Status status = output.write(transport);
            if (status != Http2Output::Status::Again) return status;
        }
        return Http2Output::Status::Again;
    }

    // Checks what is queued (`segments` of them left in files or memory),
    // drains it `budget` bytes a write, and checks that exactly `expected`
    // came out and nothing is left.
    static void expect_drains_to(Http2Output& output, size_t budget, const std::string& expected,
                                 size_t segments) {
        ThrottledTransport transport;
        EXPECT_EQ(output.pending(), expected.size());
        EXPECT_EQ(output.segments(), segments);
        EXPECT_EQ(drain(output, transport, budget), Http2Output::Status::Done);
        EXPECT_EQ(transport.received, expected);
        EXPECT_TRUE(output.empty());
        EXPECT_EQ(output.segments(), 0U);
    }

    test::TempDir dir_{"http2-output"};
    std::string contents_;
    std::string path_;
    FileRef file_;
};

TEST_F(Http2OutputTest, EverythingLeavesInOrderWhateverEachWriteTakes) {
    for (size_t budget : {size_t(1), size_t(2), size_t(7), size_t(9), size_t(64), size_t(4096)}) {
        SCOPED_TRACE(budget);
        Http2Output output;
        output.append("SETTINGS");
        output.append_file("HEADER-1:", file_, fd(), 10, 100);
        output.append("WINDOW");
        ASSERT_EQ(output.append_file_copy("HEADER-2:", fd(), 200, 50), 0);
        output.append_file("HEADER-3:", file_, fd(), 0, 5);
        output.append_file("HEADER-4:", file_, fd(), 295, 5);
        std::string expected = "SETTINGS" + std::string("HEADER-1:") + slice(10, 100) + "WINDOW" +
                               "HEADER-2:" + slice(200, 50) + "HEADER-3:" + slice(0, 5) +
                               "HEADER-4:" + slice(295, 5);
        expect_drains_to(output, budget, expected, 3);
    }
}

TEST_F(Http2OutputTest, MemorySegmentsLeaveInOrderWhateverEachWriteTakes) {
    for (size_t budget : {size_t(1), size_t(2), size_t(7), size_t(9), size_t(64), size_t(4096)}) {
        SCOPED_TRACE(budget);
        Http2Output output;
        output.append("SETTINGS");
        output.append_memory("HEADER-1:", file_, memory(10), 100);
        output.append_memory("HEADER-2:", file_, memory(110), 3);
        output.append("WINDOW");
        output.append_file("HEADER-3:", file_, fd(), 200, 50);
        output.append_memory("HEADER-4:", file_, memory(0), 1);
        output.append_memory("HEADER-5:", file_, memory(299), 0); // only its header
        ASSERT_EQ(output.append_file_copy("HEADER-6:", fd(), 250, 20), 0);
        output.append_memory("HEADER-7:", file_, memory(270), 30);
        std::string expected =
            "SETTINGS" + std::string("HEADER-1:") + slice(10, 100) + "HEADER-2:" + slice(110, 3) +
            "WINDOW" + "HEADER-3:" + slice(200, 50) + "HEADER-4:" + slice(0, 1) +
            "HEADER-5:" + "HEADER-6:" + slice(250, 20) + "HEADER-7:" + slice(270, 30);
        expect_drains_to(output, budget, expected, 5);
    }
}

TEST_F(Http2OutputTest, FramesInMemoryLeaveInOneWritev) {
    Http2Output output;
    ThrottledTransport transport;
    std::string expected;
    for (size_t at = 0; at < 300; at += 30) {
        output.append_memory("HEADER:", file_, memory(at), 30);
        output.append("PING");
        expected += "HEADER:" + slice(at, 30) + "PING";
    }
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.received, expected);
    EXPECT_EQ(transport.writes, 1);
    EXPECT_EQ(transport.max_pieces, 21); // header, payload, PING + header, ..., PING
    EXPECT_FALSE(transport.last_more);
}

TEST_F(Http2OutputTest, AWritevTakesAtMostMaxIovecsPieces) {
    Http2Output output;
    ThrottledTransport transport;
    std::string expected;
    for (size_t i = 0; i < 100; ++i) {
        output.append_memory("H:", file_, memory(i), 1);
        expected += "H:" + slice(i, 1);
    }
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.received, expected);
    EXPECT_EQ(transport.max_pieces, Http2Output::kMaxIovecs);
    EXPECT_EQ(transport.writes, 4); // 200 pieces, 64 at a time
}

TEST_F(Http2OutputTest, AMemorySegmentKeepsItsFileUntilSent) {
    Http2Output output;
    ThrottledTransport transport;
    int file_fd = fd();
    output.append_memory("HEADER:", file_, memory(0), 100);
    output.append("PING");
    file_.reset(); // the stream closed: the segment's reference is the last one
    transport.budget = 50;
    EXPECT_EQ(output.write(transport), Http2Output::Status::Again);
    EXPECT_NE(::fcntl(file_fd, F_GETFD), -1); // half sent: the entry is alive
    transport.budget = 57;                    // the rest of the payload, not PING
    EXPECT_EQ(output.write(transport), Http2Output::Status::Again);
    EXPECT_EQ(::fcntl(file_fd, F_GETFD), -1); // its payload sent: gone at once
    transport.budget = size_t(-1);
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.received, "HEADER:" + slice(0, 100) + "PING");
}

TEST_F(Http2OutputTest, ReleaseDropsMemorySegmentsAndTheirFiles) {
    Http2Output output;
    int file_fd = fd();
    output.append_memory("HEADER:", file_, memory(0), 100);
    file_.reset();
    EXPECT_NE(::fcntl(file_fd, F_GETFD), -1);
    output.release(); // the connection closed before the frame went out
    EXPECT_TRUE(output.empty());
    EXPECT_EQ(output.segments(), 0U);
    EXPECT_EQ(::fcntl(file_fd, F_GETFD), -1);
}

TEST_F(Http2OutputTest, BytesBeforeASegmentGoWithMore) {
    Http2Output output;
    ThrottledTransport transport;
    output.append_file("HEADER-1:", file_, fd(), 0, 10);
    output.append_file("HEADER-2:", file_, fd(), 10, 10);
    output.append("GOAWAY");
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.more_before_file, (std::vector<bool>{true, true}));
    EXPECT_FALSE(transport.last_more); // nothing follows the last frame
}

TEST_F(Http2OutputTest, ASegmentKeepsItsFileOpenUntilSent) {
    Http2Output output;
    ThrottledTransport transport;
    int file_fd = fd();
    output.append_file("HEADER:", file_, file_fd, 0, 100);
    file_.reset(); // the stream closed: the segment's reference is the last one
    EXPECT_NE(::fcntl(file_fd, F_GETFD), -1);
    transport.budget = 50;
    EXPECT_EQ(output.write(transport), Http2Output::Status::Again);
    EXPECT_NE(::fcntl(file_fd, F_GETFD), -1); // half sent: still open
    transport.budget = size_t(-1);
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(::fcntl(file_fd, F_GETFD), -1); // sent: closed at once
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(transport.received, "HEADER:" + slice(0, 100));
}

TEST_F(Http2OutputTest, ReleaseDropsTheSegmentsAndTheirFiles) {
    Http2Output output;
    int file_fd = fd();
    output.append_file("HEADER:", file_, file_fd, 0, 100);
    file_.reset();
    output.release(); // the connection closed before the frame went out
    EXPECT_TRUE(output.empty());
    EXPECT_EQ(output.segments(), 0U);
    EXPECT_EQ(::fcntl(file_fd, F_GETFD), -1);
}

TEST_F(Http2OutputTest, AFileThatShrankEndsTheOutput) {
    Http2Output output;
    ThrottledTransport transport;
    output.append_file("HEADER:", file_, fd(), 0, 200);
    output.append("NEXT");
    ASSERT_EQ(::ftruncate(fd(), 150), 0);
    transport.budget = 100;
    EXPECT_EQ(output.write(transport), Http2Output::Status::Again);
    transport.budget = size_t(-1);
    EXPECT_EQ(output.write(transport), Http2Output::Status::FileEnded);
    EXPECT_EQ(output.file_error(), EIO);
    EXPECT_EQ(output.failed_path(), "data.bin");
    EXPECT_EQ(transport.received, "HEADER:" + slice(0, 150)); // nothing after the short frame
}

TEST_F(Http2OutputTest, ACopyPastTheEndAppendsNothing) {
    Http2Output output;
    output.append("PING");
    EXPECT_EQ(output.append_file_copy("HEADER:", fd(), 250, 100), EIO);
    EXPECT_EQ(output.pending(), 4U);
    ThrottledTransport transport;
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.received, "PING");
}

TEST_F(Http2OutputTest, AnEmptySegmentIsOnlyItsHeader) {
    Http2Output output;
    ThrottledTransport transport;
    output.append_file("HEADER:", file_, fd(), 300, 0);
    EXPECT_EQ(output.segments(), 0U);
    EXPECT_EQ(output.write(transport), Http2Output::Status::Done);
    EXPECT_EQ(transport.received, "HEADER:");
}

// Real sendfile and sendmsg into a non-blocking socket that fills up: partial
// sends and EAGAIN in the middle of file and memory segments, the bytes read
// back exactly.
TEST(Http2OutputSocket, SendfileAndMemoryThroughAFullSocket) {
    test::TempDir dir("http2-output-socket");
    ASSERT_TRUE(dir.ok());
    std::string contents(1 << 20, '\0');
    for (size_t i = 0; i < contents.size(); ++i)
        contents[i] = char((i * 7919) >> 3);
    std::string path = dir.file("big.bin");
    int raw = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(raw, 0);
    ASSERT_EQ(::write(raw, contents.data(), contents.size()), ssize_t(contents.size()));
    auto* cached = new CachedFile;
    cached->identity.fd = UniqueFd(raw);
    cached->identity.data = contents;
    FileRef file(cached);
    const char* in_memory = cached->identity.data.data();

    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    UniqueFd reader(pair[1]);
    PlainTransport transport{UniqueFd(pair[0])};
    ASSERT_TRUE(transport.zero_copy_files());

    Http2Output output;
    std::string expected;
    constexpr size_t kFrame = 16384;
    for (size_t at = 0; at < contents.size(); at += kFrame) {
        std::string header = "frame" + std::to_string(at) + ":";
        if ((at / kFrame) % 3 == 0)
            output.append_file(header, file, raw, at, kFrame);
        else
            output.append_memory(header, file, in_memory + at, kFrame);
        expected += header + contents.substr(at, kFrame);
    }
    file.reset(); // only the segments keep the file open

    std::string received;
    char buffer[65536];
    Http2Output::Status status = Http2Output::Status::Again;
    int agains = 0;
    while (status == Http2Output::Status::Again) {
        status = output.write(transport);
        if (status == Http2Output::Status::Again) ++agains;
        for (ssize_t n; (n = ::read(reader.get(), buffer, sizeof buffer)) > 0;)
            received.append(buffer, size_t(n));
    }
    ASSERT_EQ(status, Http2Output::Status::Done);
    for (ssize_t n; (n = ::read(reader.get(), buffer, sizeof buffer)) > 0;)
        received.append(buffer, size_t(n));
    EXPECT_GT(agains, 0); // the socket did fill up on the way
    EXPECT_EQ(received.size(), expected.size());
    EXPECT_TRUE(received == expected);
    EXPECT_EQ(::fcntl(raw, F_GETFD), -1); // the last segment sent closed the file
}

} // namespace
} // namespace lepus
