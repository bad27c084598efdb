// For tests: an Http2FrameVisitor that writes what it is told as one line per
// event, DATA pieces joined into one event per frame so that the log does not
// depend on how the input was split. Used by http2_frames_test.cc and the
// frame decoder's fuzzer.
#pragma once

#include "http/http2_frames.h"

#include <string>

namespace lepus {

class Http2FrameRecorder final : public Http2FrameVisitor {
public:
    std::string log;
    // Stop (return false) at the first event of this kind: "", none.
    std::string stop_at;

    bool on_data_begin(const Http2FrameHeader& h) override {
        data_.clear();
        return event("data-begin " + std::to_string(h.stream_id) + " " + std::to_string(h.length));
    }
    bool on_data(const Http2FrameHeader&, std::string_view piece) override {
        data_.append(piece);
        return true;
    }
    bool on_data_end(const Http2FrameHeader& h) override {
        return event("data " + std::to_string(h.stream_id) + " [" + data_ + "]" +
                     (h.has(http2_flag::kEndStream) ? " end" : ""));
    }
    bool on_headers(const Http2FrameHeader& h, uint32_t depends_on,
                    std::string_view block) override {
        return event("headers " + std::to_string(h.stream_id) + " dep " +
                     std::to_string(depends_on) + " [" + std::string(block) + "]" +
                     (h.has(http2_flag::kEndStream) ? " end" : ""));
    }
    bool on_priority(uint32_t id, uint32_t depends_on) override {
        return event("priority " + std::to_string(id) + " " + std::to_string(depends_on));
    }
    bool on_rst_stream(uint32_t id, uint32_t error) override {
        return event("rst " + std::to_string(id) + " " + std::to_string(error));
    }
    bool on_setting(uint16_t id, uint32_t value) override {
        return event("setting " + std::to_string(id) + "=" + std::to_string(value));
    }
    bool on_settings_end(bool ack) override { return event(ack ? "settings ack" : "settings"); }
    bool on_ping(bool ack, std::string_view data) override {
        return event(std::string(ack ? "ping ack [" : "ping [") + std::string(data) + "]");
    }
    bool on_goaway(uint32_t last, uint32_t error) override {
        return event("goaway " + std::to_string(last) + " " + std::to_string(error));
    }
    bool on_window_update(uint32_t id, uint32_t increment) override {
        return event("window " + std::to_string(id) + " " + std::to_string(increment));
    }
    void on_connection_error(Http2Error error, const char*) override {
        log += "error " + std::to_string(uint32_t(error)) + "\n";
    }

private:
    bool event(const std::string& line) {
        log += line + "\n";
        return stop_at.empty() || line.rfind(stop_at, 0) != 0;
    }
    std::string data_;
};

} // namespace lepus
