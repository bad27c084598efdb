// libFuzzer driver for decode_path (src/http/path.h): the gate between a request
// target and the file system.
//
// Checked on success: the result starts with '/', holds no NUL, no "." or ".."
// segment and no "//"; a raw path ending in '/' stays a directory; encoding it
// with append_percent_encoded (printable ASCII only) and decoding that gives it
// back unchanged, so the normal form is a fixed point. On failure: the status is 400. The payload
// is the raw path; the FuzzInput prefix is ignored but kept so that every corpus has the same
// layout.
#include "fuzz_input.h"
#include "http/path.h"

#include <string>
#include <string_view>

namespace {

bool has_segment(std::string_view path, std::string_view segment) {
    size_t start = 0;
    while (start < path.size()) {
        size_t slash = path.find('/', start);
        if (slash == std::string_view::npos) slash = path.size();
        if (path.substr(start, slash - start) == segment) return true;
        start = slash + 1;
    }
    return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    std::string_view raw(input.payload().data(), input.payload().size());
    std::string out = "stale"; // decode_path must not depend on what `out` held
    int status = lepus::decode_path(raw, out);
    if (status != 0) {
        LEPUS_FUZZ_CHECK(status == 400);
        return 0;
    }
    LEPUS_FUZZ_CHECK(!out.empty() && out[0] == '/');
    LEPUS_FUZZ_CHECK(out.find('\0') == std::string::npos);
    LEPUS_FUZZ_CHECK(out.find("//") == std::string::npos);
    LEPUS_FUZZ_CHECK(!has_segment(out, ".."));
    LEPUS_FUZZ_CHECK(!has_segment(out, "."));
    // A directory stays a directory: the trailing slash follows the raw path.
    if (!raw.empty() && raw.back() == '/') LEPUS_FUZZ_CHECK(out.back() == '/');

    std::string encoded;
    lepus::append_percent_encoded(out, encoded);
    for (char c : encoded)
        LEPUS_FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 &&
                         static_cast<unsigned char>(c) < 0x7f);
    std::string again;
    LEPUS_FUZZ_CHECK(lepus::decode_path(encoded, again) == 0);
    LEPUS_FUZZ_CHECK(again == out);
    return 0;
}
