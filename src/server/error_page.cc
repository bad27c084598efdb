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

} // namespace

bool apply_error_page(StaticHandler& files, const Request& request, std::string_view page,
                      uint64_t now_ms, Response& response, Response& scratch) {
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
    files.handle(fetch, response.keep_alive, now_ms, scratch);
    if (scratch.head.status != 200) {
        scratch.reset();
        return false;
    }

    // What the original answer said about the error (Allow for 405, Content-Range
    // for 416, Retry-After for 503) stays, and its status; the fields of its
    // built-in body go, and of the page's only those describing its content
    // (no ETag, Last-Modified or Accept-Ranges: they would describe the page,
    // not the error).
    for (std::string_view name : {"Content-Type", "Content-Encoding", "Vary"})
        response.head.remove(name);
    scratch.head.for_each([&](std::string_view name, std::string_view value) {
        if (is_one_of(name, {"Content-Type", "Content-Encoding", "Vary"}))
            response.head.add(name, value);
    });
    response.head.content_length = scratch.head.content_length;
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
