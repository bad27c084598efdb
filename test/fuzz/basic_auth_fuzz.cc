// libFuzzer driver for basic auth's two parsers: the Authorization field value
// (parse_basic_credentials, server/basic_auth.h; options bit 0 clear) and the
// htpasswd file (Htpasswd::parse, server/htpasswd.h; bit 0 set). Checked: a
// user never holds ':' and neither part a control byte; a parsed file only
// holds hashes lepus checks, every user is found again, and a refusal is one
// line; no read past the input (an exact-size heap copy: ASan sees those).
#include "fuzz_input.h"
#include "server/basic_auth.h"
#include "server/htpasswd.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace {

bool has_control(std::string_view text) {
    return std::any_of(text.begin(), text.end(),
                       [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    lepus::fuzz::FuzzInput input(data, size);
    std::span<const char> payload = input.payload();
    auto copy = std::make_unique<char[]>(payload.size());
    if (!payload.empty()) std::memcpy(copy.get(), payload.data(), payload.size());
    std::string_view text(copy.get(), payload.size());

    if ((input.options() & 1) == 0) {
        std::string decoded;
        if (auto credentials = lepus::parse_basic_credentials(text, decoded)) {
            LEPUS_FUZZ_CHECK(credentials->user.find(':') == std::string_view::npos);
            LEPUS_FUZZ_CHECK(!has_control(credentials->user));
            LEPUS_FUZZ_CHECK(!has_control(credentials->password));
            LEPUS_FUZZ_CHECK(credentials->user.size() + 1 + credentials->password.size() ==
                             decoded.size());
        }
        return 0;
    }
    std::string error;
    auto file = lepus::Htpasswd::parse(text, "pw", error);
    if (!file) {
        LEPUS_FUZZ_CHECK(error.starts_with("pw:"));
        LEPUS_FUZZ_CHECK(error.find('\n') == std::string::npos);
        return 0;
    }
    // Every line that is not blank or a comment became an entry that can be found.
    for (size_t start = 0; start < text.size();) {
        size_t end = std::min(text.find('\n', start), text.size());
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos || line.starts_with('#')) continue;
        const lepus::Htpasswd::Entry* entry = file->find(line.substr(0, colon));
        LEPUS_FUZZ_CHECK(entry != nullptr);
        LEPUS_FUZZ_CHECK(lepus::refused_hash_reason(entry->hash).empty());
    }
    return 0;
}
