// BufferedBodyStream: the inner stream is made only at end_body, and gets the
// body whole and in order, from memory or the temporary file, whatever its
// back-pressure; a temporary directory that cannot hold the file fails (500)
// once the body is in.
#include "http/buffered_body_stream.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

// A backend stream that takes at most `per_offer` bytes per offer_body and
// nothing until poll() has "sent its request" (as FastCgiExchange).
class RecordingStream final : public ResponseStream {
public:
    RecordingStream(std::string& received, bool& ended, size_t per_offer)
        : received_(received), ended_(ended), per_offer_(per_offer) {}
    size_t offer_body(std::span<const char> data) override {
        if (!sent_) return 0;
        size_t take = std::min(data.size(), per_offer_);
        received_.append(data.data(), take);
        return take;
    }
    void end_body() override { ended_ = true; }
    StreamState poll() override {
        sent_ = true;
        return ended_ ? StreamState::Ready : StreamState::Pending;
    }
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override { return {}; }
    void consume(size_t) override {}
    bool ended() const override { return true; }
    int error_status() const override { return 502; }
    std::span<const Header> error_fields() const override { return {}; }
    void release() override {}

private:
    std::string& received_;
    bool& ended_;
    size_t per_offer_;
    bool sent_ = false;
    StreamHead head_;
};

std::string pattern(size_t size) {
    std::string out;
    for (size_t i = 0; i < size; ++i)
        out.push_back(char(i * 7 + i / 251));
    return out;
}

// Offers `body` in pieces of `piece`, ends it, then polls until the inner
// stream has it all; returns what it received.
std::string relay(const BodyBufferOptions& options, const std::string& body, size_t piece,
                  size_t per_offer, int* opened = nullptr) {
    std::string received;
    bool ended = false;
    int made = 0;
    BufferedBodyStream stream(
        [&] {
            ++made;
            return std::make_unique<RecordingStream>(received, ended, per_offer);
        },
        options);
    for (size_t at = 0; at < body.size(); at += piece) {
        size_t size = std::min(piece, body.size() - at);
        EXPECT_EQ(stream.offer_body({body.data() + at, size}), size); // all taken at once
        EXPECT_EQ(stream.poll(), StreamState::Pending);
    }
    EXPECT_EQ(made, 0); // no backend while the body arrives
    stream.end_body();
    EXPECT_EQ(made, 1);
    for (int i = 0; i < 1000000 && !ended; ++i)
        stream.poll();
    EXPECT_TRUE(ended);
    EXPECT_EQ(stream.poll(), StreamState::Ready);
    if (opened) *opened = made;
    return received;
}

TEST(BufferedBodyStream, SmallBodyFromMemory) {
    BodyBufferOptions options{1024, "/tmp"};
    std::string body = pattern(1000);
    EXPECT_EQ(relay(options, body, 1, 3), body);
    EXPECT_EQ(relay(options, body, 1000, 1000), body);
}

TEST(BufferedBodyStream, LargeBodyThroughTheFile) {
    BodyBufferOptions options{1024, "/tmp"};
    std::string body = pattern(300000); // past the memory limit and several replay chunks
    EXPECT_EQ(relay(options, body, 1000, 70000), body);
    EXPECT_EQ(relay(options, body, 65536, 4093), body);
}

TEST(BufferedBodyStream, EmptyBodyOpensAtEnd) {
    BodyBufferOptions options{1024, "/tmp"};
    int opened = 0;
    EXPECT_EQ(relay(options, "", 1, 1, &opened), "");
    EXPECT_EQ(opened, 1);
}

TEST(BufferedBodyStream, MissingTempDirFailsOnceTheBodyIsIn) {
    BodyBufferOptions options{16, "/nonexistent-lepus-dir"};
    bool made = false;
    BufferedBodyStream stream(
        [&] {
            made = true;
            return std::unique_ptr<ResponseStream>();
        },
        options);
    std::string body = pattern(100);
    EXPECT_EQ(stream.offer_body(body), body.size());
    EXPECT_EQ(stream.poll(), StreamState::Pending);  // the client is still sending
    EXPECT_EQ(stream.offer_body(body), body.size()); // dropped
    stream.end_body();
    EXPECT_EQ(stream.poll(), StreamState::Failed);
    EXPECT_EQ(stream.error_status(), 500);
    EXPECT_FALSE(made);
}

TEST(BufferedBodyStream, TempFileHasNoName) {
    UniqueFd file = open_body_temp_file("/tmp");
    ASSERT_TRUE(file.valid());
    EXPECT_EQ(::pwrite(file.get(), "abc", 3, 0), 3);
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", file.get());
    char target[512] = {};
    ASSERT_GT(::readlink(link, target, sizeof target - 1), 0);
    EXPECT_NE(std::string(target).find("(deleted)"), std::string::npos) << target;
}

} // namespace
} // namespace lepus
