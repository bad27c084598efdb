// libFuzzer driver for the HTTP/2 frame decoder (src/http/http2_frames.h):
// the payload is decoded whole and in the pieces FuzzInput cuts it into, and
// both must report the same frames (DATA pieces joined) and the same error.
// Options bit 0: the input starts after the client preface.
#include "../http/http2_frames_recorder.h"
#include "fuzz_input.h"

#include <string_view>
#include <vector>

namespace {

std::string decode(std::span<const char> payload, const std::vector<size_t>& cuts, bool preface) {
    lepus::Http2FrameDecoder decoder(preface);
    lepus::Http2FrameRecorder recorder;
    size_t at = 0;
    for (size_t cut : cuts) {
        // An exact-size heap copy per read: a view past it is an ASan report.
        std::vector<char> read(payload.begin() + ptrdiff_t(at), payload.begin() + ptrdiff_t(cut));
        read.shrink_to_fit();
        bool going = decoder.feed({read.data(), read.size()}, recorder);
        LEPUS_FUZZ_CHECK(going == !decoder.stopped());
        at = cut;
    }
    return recorder.log;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    bool preface = (input.options() & 1) == 0;
    std::span<const char> payload = input.payload();
    std::string whole = decode(payload, {payload.size()}, preface);
    std::string split = decode(payload, input.cuts(), preface);
    LEPUS_FUZZ_CHECK(whole == split);
    return 0;
}
