#include "http/path.h"

namespace lepus {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Percent-decodes once (a decoded '%' is never decoded again: "%252e" is "%2e").
// A decoded '/' (%2F) becomes a separator like nginx does; the normalisation
// that follows then treats it like any other slash.
int percent_decode(std::string_view raw, std::string& out) {
    out.clear();
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '%') {
            if (i + 2 >= raw.size()) return 400;
            int high = hex_value(raw[i + 1]);
            int low = hex_value(raw[i + 2]);
            if (high < 0 || low < 0) return 400;
            c = char(high * 16 + low);
            i += 2;
        }
        if (c == '\0') return 400;
        out.push_back(c);
    }
    return 0;
}

// The common case: nothing to decode and nothing to normalise.
bool is_plain(std::string_view raw) {
    for (size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '%' || c == '\0') return false;
        if (c == '/' && i + 1 < raw.size() && (raw[i + 1] == '/' || raw[i + 1] == '.'))
            return false;
    }
    return true;
}

} // namespace

bool is_normal_path(std::string_view raw) {
    return !raw.empty() && raw[0] == '/' && is_plain(raw);
}

int decode_path(std::string_view raw, std::string& out) {
    if (raw.empty() || raw[0] != '/') return 400;
    if (is_plain(raw)) {
        out.assign(raw.data(), raw.size());
        return 0;
    }
    // Scratch space reused per thread: no allocation per request once warm.
    thread_local std::string decoded;
    if (int status = percent_decode(raw, decoded)) return status;

    // Walk the segments; `out` always ends with '/' while building.
    out.clear(); // (not assign("/"): GCC 12 -Wrestrict false positive, PR 105651)
    out.push_back('/');
    bool directory = false;
    size_t pos = 0;
    while (pos < decoded.size()) {
        size_t end = decoded.find('/', pos);
        if (end == std::string::npos) end = decoded.size();
        std::string_view segment(decoded.data() + pos, end - pos);
        directory = end < decoded.size(); // a '/' follows this segment
        if (segment == ".") {
            directory = true;
        } else if (segment == "..") {
            if (out.size() == 1) return 400; // would leave the root
            size_t previous = out.rfind('/', out.size() - 2);
            out.resize(previous + 1);
            directory = true;
        } else if (!segment.empty()) {
            out.append(segment);
            out.push_back('/');
        }
        pos = end + 1;
    }
    if (decoded.back() == '/') directory = true;
    if (!directory && out.size() > 1) out.pop_back();
    return 0;
}

bool has_hidden_segment(std::string_view path) {
    // RFC 8615: /.well-known/ at the root is a public place by design (ACME
    // HTTP-01 challenges, security.txt, change-password), and every anchor
    // serves it whatever its dotfile rule (issue 34); a hidden name inside it
    // is still hidden.
    constexpr std::string_view kWellKnown = "/.well-known";
    size_t from = 0;
    if (path.starts_with(kWellKnown) &&
        (path.size() == kWellKnown.size() || path[kWellKnown.size()] == '/'))
        from = kWellKnown.size();
    for (size_t i = from; i + 1 < path.size(); ++i)
        if (path[i] == '/' && path[i + 1] == '.') return true;
    return false;
}

void append_percent_encoded(std::string_view path, std::string& out) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char c : path) {
        // RFC 3986 §3.3 pchar = unreserved / sub-delims / ":" / "@"; we keep a
        // conservative subset and also encode quotes, '&' and ':' so an href stays
        // plain and a name like "javascript:x" cannot read as a scheme (§4.2).
        bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~' || c == '/' || c == '!' ||
                    c == '$' || c == '(' || c == ')' || c == '*' || c == '+' || c == ',' ||
                    c == ';' || c == '=' || c == '@';
        if (safe) {
            out.push_back(char(c));
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        }
    }
}

} // namespace lepus
