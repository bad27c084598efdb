#include "server/error_page.h"

#include "base/ascii.h"

#include <string>

namespace lepus {
namespace {

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
    for (std::string_view candidate : names)
        if (ascii_iequals(name, candidate)) return true;
    return false;
}

// Appends the header lines of `head` (status line and final empty line
// skipped) for which keep(name) is true.
template <typename Keep> void copy_headers(std::string_view head, Keep keep, std::string& out) {
    size_t line_end = head.find("\r\n");
    while (line_end != std::string_view::npos) {
        size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        if (line_end == std::string_view::npos || line_end == start) break;
        std::string_view line = head.substr(start, line_end - start);
        std::string_view name = line.substr(0, line.find(':'));
        if (keep(name)) out.append(line).append("\r\n");
    }
}

} // namespace

bool apply_error_page(StaticHandler& files, const Request& request, std::string_view page,
                      time_t now, uint64_t now_ms, Response& response, Response& scratch) {
    // The page is fetched as a plain GET of its path (nginx turns any method
    // into GET for it; HEAD stays HEAD), with no validators and no Range: a
    // conditional or partial error page would make no sense.
    Request fetch;
    fetch.method = request.is_head() ? Method::Head : Method::Get;
    fetch.method_text = method_name(fetch.method);
    fetch.target = page;
    fetch.path = page;
    fetch.version_minor = request.version_minor;
    fetch.host = request.host;
    fetch.keep_alive = response.keep_alive;
    fetch.accept_encoding = request.accept_encoding;
    files.handle(fetch, response.keep_alive, now, now_ms, scratch);
    if (scratch.status != 200) {
        scratch.reset();
        return false;
    }

    // What the original answer said about the error (Allow for 405, Content-Range
    // for 416, Retry-After for 503) stays; the headers of its built-in body go,
    // and of the page's only those describing its content (no ETag,
    // Last-Modified or Accept-Ranges: they would describe the page, not the error).
    std::string extras;
    copy_headers(
        response.head,
        [](std::string_view name) {
            return !is_one_of(name, {"Date", "Server", "Content-Type", "Content-Length",
                                     "Content-Encoding", "Vary", "Connection", "Keep-Alive"});
        },
        extras);
    copy_headers(
        scratch.head,
        [](std::string_view name) {
            return is_one_of(name, {"Content-Type", "Content-Encoding", "Vary", "Content-Length"});
        },
        extras);
    bool keep_alive = response.keep_alive;
    begin_head(response.status, now, response); // the original status line
    response.head.append(extras);
    finish_head(keep_alive, request.version_minor, response);
    response.owned_body.clear();
    response.body = scratch.body; // into the cached file, kept alive by `file`
    const char* owned = scratch.owned_body.data();
    if (!scratch.body.empty() && scratch.body.data() >= owned &&
        scratch.body.data() < owned + scratch.owned_body.size()) {
        // A generated page (a directory listing): its storage moves along.
        auto offset = size_t(scratch.body.data() - owned);
        response.owned_body.swap(scratch.owned_body);
        response.body = std::string_view(response.owned_body).substr(offset, scratch.body.size());
    }
    response.file = std::move(scratch.file);
    response.file_fd = scratch.file_fd;
    response.file_offset = scratch.file_offset;
    response.file_length = scratch.file_length;
    scratch.reset();
    return true;
}

} // namespace lepus
