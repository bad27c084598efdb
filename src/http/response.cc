#include "http/response.h"

#include "base/time_cache.h"
#include "http/http_date.h"
#include "log/error_log.h"

#include <charconv>
#include <cstdio>
#include <cstring>

namespace lepus {
namespace {

struct StatusEntry {
    int status;
    std::string_view reason;
};

// The one list of statuses lepus knows (RFC 9110 §15).
constexpr StatusEntry kStatuses[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {406, "Not Acceptable"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Content"},
    {426, "Upgrade Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

} // namespace

void append_hex(uint64_t value, std::string& out) {
    char digits[16];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[value & 15];
        value >>= 4;
    } while (value);
    while (n)
        out.push_back(digits[--n]);
}

void append_decimal(uint64_t value, std::string& out) {
    char digits[24];
    auto result = std::to_chars(digits, digits + sizeof digits, value); // no locale, no printf
    out.append(digits, size_t(result.ptr - digits));
}

void Response::reset() {
    head.clear();
    body = {};
    owned_body.clear();
    file.reset();
    file_fd = -1;
    file_offset = 0;
    file_length = 0;
    body_file_fd = -1;
    body_file_offset = 0;
    keep_alive = true;
}

std::string_view status_reason(int status) {
    for (const StatusEntry& entry : kStatuses)
        if (entry.status == status) return entry.reason;
    return "Unknown";
}

void append_common_headers(time_t now, std::string& head) {
    // The date text is formatted once a second (base/time_cache.h); the two lines are
    // assembled on the stack so the head grows by one append, as this runs per response.
    static constexpr std::string_view kPrefix = "Date: ";
    static constexpr std::string_view kSuffix = "\r\nServer: lepus\r\n";
    const std::string_view date = cached_http_date(now);
    char lines[kPrefix.size() + kHttpDateLength + kSuffix.size()];
    memcpy(lines, kPrefix.data(), kPrefix.size());
    memcpy(lines + kPrefix.size(), date.data(), kHttpDateLength);
    memcpy(lines + kPrefix.size() + kHttpDateLength, kSuffix.data(), kSuffix.size());
    head.append(lines, sizeof lines);
}

void begin_head(int status, bool keep_alive, Response& out) {
    out.head.clear();
    out.head.status = status;
    out.keep_alive = keep_alive;
}

void build_error_response(int status, const ReplyContext& context, Response& out) {
    out.reset();
    begin_head(status, context.keep_alive, out);
    if (!status_has_no_body(status)) {
        std::string_view reason = status_reason(status);
        std::string& page = out.owned_body;
        char code[16];
        std::string_view code_text(
            code, size_t(std::to_chars(code, code + sizeof code, status).ptr - code));
        page.append("<html><head><title>").append(code_text).append(" ").append(reason);
        page.append("</title></head><body><h1>").append(code_text).append(" ").append(reason);
        page.append("</h1><hr>lepus</body></html>\n");
        out.head.add("Content-Type", "text/html; charset=utf-8");
        out.head.content_length = page.size();
        if (context.head_request) page.clear();
        out.body = page;
    }
}

void build_error_response(int status, bool keep_alive, Response& out) {
    ReplyContext context;
    context.keep_alive = keep_alive;
    build_error_response(status, context, out);
}

void report_internal_error(std::string_view what, std::string_view path, int error_number) {
    // Through the error log (asynchronous), never a write to stderr from a reactor thread.
    log_error("%.*s \"%.*s\" failed: %s", int(what.size()), what.data(), int(path.size()),
              path.data(), strerror(error_number));
}

} // namespace lepus
