#include "server/x_accel.h"

#include "base/ascii.h"
#include "http/path.h"
#include "log/error_log.h"
#include "server/route_state.h"

#include <filesystem>

namespace lepus {

std::optional<XAccel> parse_x_accel(std::string_view text, std::string& error) {
    size_t equals = text.find('=');
    if (equals == std::string_view::npos) {
        error = "x-accel: '" + std::string(text) + "' is not PREFIX=DIR (/protected/=/srv/files)";
        return std::nullopt;
    }
    XAccel x_accel;
    x_accel.prefix.assign(text.substr(0, equals));
    std::string_view dir = text.substr(equals + 1);
    const std::string& prefix = x_accel.prefix;
    // The prefix is matched on decoded, normalised paths (http/path.h).
    std::string normal;
    if (prefix.size() < 2 || !prefix.starts_with('/') || !prefix.ends_with('/') ||
        decode_path(prefix, normal) != 0 || normal != prefix) {
        error = "x-accel: the prefix '" + prefix + "' must be a plain path such as /protected/";
        return std::nullopt;
    }
    if (dir.empty()) {
        error = "x-accel: '" + std::string(text) + "' names no folder after '='";
        return std::nullopt;
    }
    // X-Sendfile paths are compared with it as text: absolute, normalised.
    std::error_code failed;
    std::filesystem::path absolute = std::filesystem::absolute(std::string(dir), failed);
    x_accel.root = absolute.lexically_normal().string();
    while (x_accel.root.size() > 1 && x_accel.root.ends_with('/'))
        x_accel.root.pop_back();
    if (!std::filesystem::is_directory(x_accel.root, failed)) {
        error = "x-accel: '" + x_accel.root + "' is not a folder";
        return std::nullopt;
    }
    return x_accel;
}

bool kept_on_x_accel(std::string_view name) {
    using namespace std::string_view_literals; // lengths known when compiled, no strlen
    for (std::string_view kept : {"Content-Type"sv, "Content-Disposition"sv, "Set-Cookie"sv,
                                  "Cache-Control"sv, "Expires"sv, "Accept-Ranges"sv})
        if (ascii_iequals(name, kept)) return true;
    return false;
}

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

const char* unsafe_x_accel_path(std::string_view path, bool percent_encoded) {
    if (!path.starts_with('/')) return "not an absolute path";
    // Segment by segment on the raw text, so that an escaped '/' cannot join
    // two segments into one and "%2e%2e" is seen as "..".
    size_t length = 0, dots = 0; // of the current segment, decoded
    for (size_t i = 0; i <= path.size(); ++i) {
        if (i == path.size() || path[i] == '/') {
            if (length == 2 && dots == 2) return "a \"..\" segment";
            length = dots = 0;
            continue;
        }
        auto c = static_cast<unsigned char>(path[i]);
        if (c == '%' && percent_encoded) {
            int high = i + 2 < path.size() ? hex_digit(path[i + 1]) : -1;
            int low = high >= 0 ? hex_digit(path[i + 2]) : -1;
            if (low < 0) return "an invalid %-escape";
            c = static_cast<unsigned char>(high * 16 + low);
            i += 2;
            if (c == '/') return "a %-escaped '/'";
        }
        if (c == '\\') return "a backslash";
        if (c < 0x20 || c == 0x7f) return "a NUL or control byte";
        ++length;
        if (c == '.') ++dots;
    }
    return nullptr;
}

void replace_fields(const ResponseHead& kept, ResponseHead& head) {
    kept.for_each([&](std::string_view name, std::string_view) { head.remove(name); });
    kept.for_each([&](std::string_view name, std::string_view value) { head.add(name, value); });
}

StreamState XAccelStream::poll() {
    StreamState state = inner_->poll();
    if (state != StreamState::Ready) return state;
    if (verdict_ == Verdict::Unchecked) verdict_ = check(inner_->head());
    switch (verdict_) {
    case Verdict::PassThrough:
        return StreamState::Ready;
    case Verdict::Redirect:
        return StreamState::Redirect;
    default:
        return StreamState::Failed;
    }
}

XAccelStream::Verdict XAccelStream::check(const StreamHead& head) {
    std::string_view redirect, sendfile;
    for (const Header& header : head.headers) {
        if (ascii_iequals(header.name, "X-Accel-Redirect"))
            redirect = header.value;
        else if (x_accel_ && ascii_iequals(header.name, "X-Sendfile"))
            sendfile = header.value;
    }
    if (redirect.empty() && sendfile.empty()) return Verdict::PassThrough;
    const Request& request = *exchange_.request;
    std::string& uri = exchange_.route->redirect_target;
    uri.clear();
    if (!redirect.empty()) {
        // A URI of this site (nginx also has "@name" locations; lepus has none).
        std::string_view path = redirect.substr(0, redirect.find('?'));
        if (const char* why = unsafe_x_accel_path(path, true)) {
            log_error("the answer to \"%.*s\" carried X-Accel-Redirect \"%.*s\", which is "
                      "refused (%s): 502",
                      int(request.target.size()), request.target.data(), int(redirect.size()),
                      redirect.data(), why);
            return Verdict::Refused;
        }
        uri.assign(redirect);
    } else if (const char* why = unsafe_x_accel_path(sendfile, false)) {
        log_error("the answer to \"%.*s\" carried X-Sendfile \"%.*s\", which is refused "
                  "(%s): 502",
                  int(request.target.size()), request.target.data(), int(sendfile.size()),
                  sendfile.data(), why);
        return Verdict::Refused;
    } else if (!sendfile_uri(sendfile, uri)) {
        log_error("the answer to \"%.*s\" carried X-Sendfile \"%.*s\", which is not beneath "
                  "the --x-accel folder %s: 502",
                  int(request.target.size()), request.target.data(), int(sendfile.size()),
                  sendfile.data(), x_accel_->root.c_str());
        return Verdict::Refused;
    }
    ResponseHead& kept = exchange_.route->redirect_fields;
    kept.clear();
    for (const Header& header : head.headers)
        if (kept_on_x_accel(header.name)) kept.add(header.name, header.value);
    return Verdict::Redirect;
}

bool XAccelStream::sendfile_uri(std::string_view path, std::string& uri) const {
    const std::string& root = x_accel_->root;
    // A text comparison: the path has no ".." (unsafe_x_accel_path), and links
    // are dealt with when the file is opened, confined beneath DIR.
    if (path.size() <= root.size() + 1 || !path.starts_with(root) || path[root.size()] != '/')
        return false;
    uri = x_accel_->prefix;
    append_percent_encoded(path.substr(root.size() + 1), uri);
    return true;
}

int XAccelStream::error_status() const {
    return verdict_ == Verdict::Refused ? 502 : inner_->error_status();
}

std::span<const Header> XAccelStream::error_fields() const {
    return verdict_ == Verdict::PassThrough || verdict_ == Verdict::Unchecked
               ? inner_->error_fields()
               : std::span<const Header>{};
}

} // namespace lepus
