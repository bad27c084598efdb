// The HTTP/2 frame layer (src/http/http2_frames.cc): every frame type decoded,
// the same events however the input is split (at every byte offset, and byte
// by byte), DATA handed on as views of the input, the framing errors of RFC
// 9113 §4 and §6 with their codes, the CONTINUATION bounds (CVE-2024-27316),
// and the writers read back by the decoder.
#include "http/http2_frames.h"
#include "http/http2_output.h"
#include "http2_frames_recorder.h"

#include <gtest/gtest.h>
#include <string>

namespace lepus {
namespace {

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
    char header[kHttp2FrameHeaderSize];
    http2_write_frame_header(header, uint32_t(payload.size()), Http2FrameType(type), flags, stream);
    return std::string(header, sizeof header) + std::string(payload);
}

std::string be32(uint32_t v) {
    return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

const std::string kPreface(kHttp2Preface);

std::string decode(std::string_view input, std::vector<size_t> cuts = {}) {
    Http2FrameDecoder decoder;
    Http2FrameRecorder recorder;
    size_t at = 0;
    cuts.push_back(input.size());
    for (size_t cut : cuts) {
        decoder.feed(input.substr(at, cut - at), recorder);
        at = cut;
    }
    return recorder.log;
}

// One of every frame a client sends, padding and priority included.
std::string conversation() {
    std::string in = kPreface;
    in += frame(4, 0, 0,
                std::string("\0\x04", 2) + be32(1 << 20) + std::string("\0\x01", 2) + be32(0));
    in += frame(8, 0, 0, be32(1000));
    // HEADERS, padded (2) with priority (depends on 0), then two CONTINUATIONs.
    in += frame(1, http2_flag::kPadded | http2_flag::kPriority, 1,
                std::string("\x02", 1) + be32(0) + "\x10" + "abc" + "pp");
    in += frame(9, 0, 1, "def");
    in += frame(9, http2_flag::kEndHeaders, 1, "gh");
    in += frame(0, http2_flag::kPadded, 1, std::string("\x03", 1) + "body" + "ppp");
    in += frame(0, http2_flag::kEndStream, 1, "!");
    in += frame(1, http2_flag::kEndHeaders | http2_flag::kEndStream, 3, "xyz");
    in += frame(0, 0, 3, "");
    in += frame(2, 0, 5, be32(3) + "\x10");
    in += frame(3, 0, 3, be32(8));
    in += frame(6, 0, 0, "12345678");
    in += frame(0x42, 0xff, 7, "unknown type, skipped");
    in += frame(4, http2_flag::kAck, 0, "");
    in += frame(8, 0, 1, be32(0x80000010)); // the reserved bit is ignored
    in += frame(7, 0, 0, be32(9) + be32(0) + "debug");
    return in;
}

const char* kConversationLog = "setting 4=1048576\n"
                               "setting 1=0\n"
                               "settings\n"
                               "window 0 1000\n"
                               "headers 1 dep 0 [abcdefgh]\n"
                               "data-begin 1 8\n"
                               "data 1 [body]\n"
                               "data-begin 1 1\n"
                               "data 1 [!] end\n"
                               "headers 3 dep 0 [xyz] end\n"
                               "data-begin 3 0\n"
                               "data 3 []\n"
                               "priority 5 3\n"
                               "rst 3 8\n"
                               "ping [12345678]\n"
                               "settings ack\n"
                               "window 1 16\n"
                               "goaway 9 0\n";

TEST(Http2Frames, EveryFrameTypeDecoded) {
    EXPECT_EQ(decode(conversation()), kConversationLog);
}

TEST(Http2Frames, TheSameEventsSplitAtEveryOffset) {
    std::string in = conversation();
    for (size_t cut = 1; cut < in.size(); ++cut)
        ASSERT_EQ(decode(in, {cut}), kConversationLog) << "cut at " << cut;
    std::vector<size_t> every;
    for (size_t at = 1; at < in.size(); ++at)
        every.push_back(at);
    EXPECT_EQ(decode(in, every), kConversationLog);
}

// A DATA payload is never copied: each piece is a view of the bytes fed.
class ViewChecker final : public Http2FrameVisitor {
public:
    std::string_view input;
    size_t pieces = 0;
    bool on_data_begin(const Http2FrameHeader&) override { return true; }
    bool on_data(const Http2FrameHeader&, std::string_view piece) override {
        EXPECT_GE(piece.data(), input.data());
        EXPECT_LE(piece.data() + piece.size(), input.data() + input.size());
        ++pieces;
        return true;
    }
    bool on_data_end(const Http2FrameHeader&) override { return true; }
    bool on_headers(const Http2FrameHeader&, uint32_t, std::string_view) override { return true; }
    bool on_priority(uint32_t, uint32_t) override { return true; }
    bool on_rst_stream(uint32_t, uint32_t) override { return true; }
    bool on_setting(uint16_t, uint32_t) override { return true; }
    bool on_settings_end(bool) override { return true; }
    bool on_ping(bool, std::string_view) override { return true; }
    bool on_goaway(uint32_t, uint32_t) override { return true; }
    bool on_window_update(uint32_t, uint32_t) override { return true; }
    void on_connection_error(Http2Error, const char*) override { ADD_FAILURE(); }
};

TEST(Http2Frames, DataIsHandedOnAsViewsOfTheInput) {
    std::string in = kPreface + frame(4, 0, 0, "") + frame(0, 0, 1, std::string(10000, 'd'));
    Http2FrameDecoder decoder;
    ViewChecker checker;
    for (size_t at = 0; at < in.size(); at += 4096) {
        std::string piece = in.substr(at, 4096); // a read buffer of its own
        checker.input = piece;
        decoder.feed(piece, checker);
    }
    EXPECT_EQ(checker.pieces, 3u);
    EXPECT_EQ(decoder.held_bytes(), Http2FrameDecoder().held_bytes()); // nothing gathered
}

std::string error_of(const std::string& frames) {
    std::string log = decode(kPreface + frame(4, 0, 0, "") + frames);
    size_t at = log.find("error ");
    return at == std::string::npos ? "none" : log.substr(at + 6, log.find('\n', at) - at - 6);
}

TEST(Http2Frames, FramingErrorsAndTheirCodes) {
    const std::string protocol = "1", flow = "3", frame_size = "6", calm = "11";
    EXPECT_EQ(error_of(frame(0, 0, 1, std::string(16385, 'x'))), frame_size); // §4.2
    EXPECT_EQ(error_of(frame(0, 0, 0, "x")), protocol);                       // §6.1
    EXPECT_EQ(error_of(frame(0, http2_flag::kPadded, 1,
                             "\x05"
                             "abcd")),
              protocol);
    EXPECT_EQ(error_of(frame(1, http2_flag::kEndHeaders, 0, "x")), protocol); // §6.2
    EXPECT_EQ(error_of(frame(1, http2_flag::kEndHeaders | http2_flag::kPadded, 1,
                             "\x09"
                             "ab")),
              protocol);
    EXPECT_EQ(error_of(frame(2, 0, 1, "1234")), frame_size); // §6.3
    EXPECT_EQ(error_of(frame(2, 0, 0, "12345")), protocol);
    EXPECT_EQ(error_of(frame(3, 0, 1, "123")), frame_size); // §6.4
    EXPECT_EQ(error_of(frame(3, 0, 0, "1234")), protocol);
    EXPECT_EQ(error_of(frame(4, 0, 1, "")), protocol); // §6.5
    EXPECT_EQ(error_of(frame(4, http2_flag::kAck, 0, "123456")), frame_size);
    EXPECT_EQ(error_of(frame(4, 0, 0, "12345")), frame_size);
    EXPECT_EQ(error_of(frame(4, 0, 0, std::string("\0\x02", 2) + be32(2))), protocol);
    EXPECT_EQ(error_of(frame(4, 0, 0, std::string("\0\x04", 2) + be32(0x80000000))), flow);
    EXPECT_EQ(error_of(frame(4, 0, 0, std::string("\0\x05", 2) + be32(100))), protocol);
    EXPECT_EQ(error_of(frame(5, http2_flag::kEndHeaders, 1, be32(2) + "x")), protocol); // §8.4
    EXPECT_EQ(error_of(frame(6, 0, 0, "1234567")), frame_size);                         // §6.7
    EXPECT_EQ(error_of(frame(6, 0, 1, "12345678")), protocol);
    EXPECT_EQ(error_of(frame(7, 0, 0, "1234567")), frame_size);               // §6.8
    EXPECT_EQ(error_of(frame(8, 0, 0, "123")), frame_size);                   // §6.9
    EXPECT_EQ(error_of(frame(9, http2_flag::kEndHeaders, 1, "x")), protocol); // §6.10
    // A header block interrupted by another frame, or another stream's CONTINUATION.
    EXPECT_EQ(error_of(frame(1, 0, 1, "a") + frame(6, 0, 0, "12345678")), protocol);
    EXPECT_EQ(error_of(frame(1, 0, 1, "a") + frame(9, http2_flag::kEndHeaders, 3, "b")), protocol);
    // CVE-2024-27316: a block in more than 8 CONTINUATION frames.
    std::string flood = frame(1, 0, 1, "a");
    for (int i = 0; i < 9; ++i)
        flood += frame(9, 0, 1, "b");
    EXPECT_EQ(error_of(flood), calm);
    EXPECT_EQ(error_of(frame(1, 0, 1, "a") + frame(9, 0, 1, "b") +
                       frame(9, http2_flag::kEndHeaders, 1, "c")),
              "none");
}

TEST(Http2Frames, ThePrefaceAndTheFirstSettingsAreRequired) {
    EXPECT_EQ(decode("GET / HTTP/1.1\r\n\r\n"), "error 1\n");
    EXPECT_EQ(decode(kPreface + frame(6, 0, 0, "12345678")), "error 1\n");
    EXPECT_EQ(decode(kPreface + frame(4, http2_flag::kAck, 0, "")), "error 1\n");
}

TEST(Http2Frames, NothingIsDecodedAfterAVisitorStops) {
    Http2FrameDecoder decoder;
    Http2FrameRecorder recorder;
    recorder.stop_at = "ping";
    std::string in =
        kPreface + frame(4, 0, 0, "") + frame(6, 0, 0, "12345678") + frame(6, 0, 0, "abcdefgh");
    EXPECT_FALSE(decoder.feed(in, recorder));
    EXPECT_EQ(recorder.log, "settings\nping [12345678]\n");
    EXPECT_FALSE(decoder.feed(frame(6, 0, 0, "abcdefgh"), recorder));
    EXPECT_EQ(recorder.log, "settings\nping [12345678]\n");
}

TEST(Http2Frames, WritersReadBackByTheDecoder) {
    Http2Output out;
    const std::pair<uint16_t, uint32_t> settings[] = {{3, 100}, {4, 262144}};
    http2_append_settings(out, settings);
    http2_append_settings_ack(out);
    http2_append_ping_ack(out, "abcdefgh");
    http2_append_window_update(out, 0, 983041);
    http2_append_rst_stream(out, 5, Http2Error::RefusedStream);
    // A block larger than the frame size: HEADERS and two CONTINUATIONs.
    std::string block(40000, 'h');
    http2_append_headers(out, 7, block, true, 16384);
    http2_append_goaway(out, 7, Http2Error::EnhanceYourCalm);
    std::string wire = kPreface + std::string(out.bytes());
    EXPECT_EQ(decode(wire), "setting 3=100\nsetting 4=262144\nsettings\nsettings ack\n"
                            "ping ack [abcdefgh]\nwindow 0 983041\nrst 5 7\n"
                            "headers 7 dep 0 [" +
                                block + "] end\ngoaway 7 11\n");
}

} // namespace
} // namespace lepus
