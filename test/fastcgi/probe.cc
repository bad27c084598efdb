// fcgi_probe: a blocking command-line FastCGI client built on lepus's FastCGI
// library (protocol, CGI params, CGI response parser), for tests and debugging.
//
//   fcgi_probe ADDRESS SCRIPT_FILENAME [--query Q] [--method M] [--body-file F]
//              [--content-type T] [--header 'Name: value']... [--script-name /x.php]
//              [--path-info /p] [--keep-conn] [--repeat N] [--timeout-ms T]
//
// ADDRESS is "unix:/path" or "HOST:PORT". With --keep-conn the N requests share
// one connection (each with a new request id); otherwise each opens its own.
// For each response it prints to stdout:
//   status S / header NAME: VALUE... / stderr-length N / app-status A /
//   body-length L, then L raw body bytes and a newline
// and finally "connections C". STDERR record text goes to stderr. Exit codes:
// 0 ok, 1 usage or connect error, 2 FastCGI protocol error, 3 connection closed
// before END_REQUEST, 4 timeout, 5 malformed CGI response header.
#include "base/unique_fd.h"
#include "fastcgi/cgi_params.h"
#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "net/socket.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

using namespace lepus;
using namespace lepus::fastcgi;

namespace {

struct Options {
    std::string address;
    std::string script_filename;
    std::string script_name; // default: "/" + basename of SCRIPT_FILENAME
    std::string path_info;
    std::string query;
    std::string method = "GET";
    std::string body;
    std::string content_type;
    std::vector<std::string> headers;
    bool keep_conn = false;
    int repeat = 1;
    int timeout_ms = 10000;
};

enum Exit { kOk = 0, kUsage = 1, kProtocol = 2, kClosed = 3, kTimeout = 4, kBadHeader = 5 };

struct Failure {
    int code;
    std::string message;
};

UniqueFd connect_to(const Options& options) {
    std::string_view address = options.address;
    UniqueFd fd;
    if (address.starts_with("unix:")) {
        sockaddr_un un{};
        un.sun_family = AF_UNIX;
        std::string_view path = address.substr(5);
        if (path.size() >= sizeof un.sun_path) return {};
        std::memcpy(un.sun_path, path.data(), path.size());
        fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&un), sizeof un) != 0) return {};
    } else {
        auto parsed = parse_listen_address(address);
        if (!parsed) return {};
        fd.reset(::socket(parsed->storage.any.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd || ::connect(fd.get(), &parsed->storage.any, parsed->length) != 0) return {};
    }
    timeval timeout{options.timeout_ms / 1000, options.timeout_ms % 1000 * 1000};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    return fd;
}

bool write_all(int fd, const char* data, size_t length) {
    while (length > 0) {
        ssize_t n = ::write(fd, data, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

// The request: BEGIN_REQUEST and PARAMS from a buffer, then the body as STDIN
// records written with writev straight from the body, as phase 2 will.
bool send_request(int fd, const Options& options, uint16_t id) {
    std::vector<Header> headers = {{"Host", "localhost"}};
    for (const std::string& line : options.headers) {
        size_t colon = line.find(':');
        std::string_view name(line.data(), colon == std::string::npos ? line.size() : colon);
        std::string_view value =
            colon == std::string::npos ? "" : std::string_view(line).substr(colon + 1);
        while (!value.empty() && value.front() == ' ')
            value.remove_prefix(1);
        headers.push_back({name, value});
    }
    std::string target = options.script_name + options.path_info;
    std::string path = target;
    if (!options.query.empty()) target += "?" + options.query;
    Request request;
    request.method_text = options.method;
    request.target = target;
    request.path = path;
    request.query = options.query;
    request.host = "localhost";
    request.headers = headers;
    request.content_type = options.content_type;
    bool has_body = !options.body.empty() || options.method == "POST" || options.method == "PUT";
    if (has_body) request.content_length = options.body.size();
    std::string root = options.script_filename.substr(0, options.script_filename.rfind('/'));
    CgiContext context{.request = request,
                       .document_root = root,
                       .script_name = options.script_name,
                       .path_info = options.path_info,
                       .script_filename = options.script_filename,
                       // Placeholders: the probe stands in for an HTTP server.
                       .remote = *parse_listen_address("127.0.0.1:40000"),
                       .local = *parse_listen_address("127.0.0.1:8080"),
                       .server_name = "localhost",
                       .content_length = request.content_length};
    std::string out;
    append_begin_request(out, id, Role::Responder, options.keep_conn);
    ParamsWriter params;
    params.begin(out, id);
    append_cgi_params(params, context);
    params.finish();
    if (!write_all(fd, out.data(), out.size())) return false;
    std::string_view body = options.body;
    while (!body.empty()) {
        auto length = static_cast<uint16_t>(std::min(body.size(), kMaxContentLength));
        auto header = stream_record_header(RecordType::Stdin, id, length);
        iovec parts[3] = {{header.data(), header.size()},
                          {const_cast<char*>(body.data()), length},
                          {const_cast<char*>(kPaddingBytes.data()), padding_for(length)}};
        size_t total = header.size() + length + padding_for(length);
        ssize_t n = ::writev(fd, parts, 3);
        if (n < 0) return false;
        if (static_cast<size_t>(n) < total) {
            // A short writev (rare on a blocking socket): finish by hand.
            std::string rest(header.data(), header.size());
            rest.append(body.data(), length);
            rest.append(kPaddingBytes.data(), padding_for(length));
            if (!write_all(fd, rest.data() + n, total - static_cast<size_t>(n))) return false;
        }
        body.remove_prefix(length);
    }
    out.clear();
    append_stream_end(out, RecordType::Stdin, id);
    return write_all(fd, out.data(), out.size());
}

// Reads one response to request `id`; prints it. Returns a Failure on error.
Failure read_response(int fd, uint16_t id) {
    RecordDecoder decoder;
    CgiResponseParser cgi;
    bool header_done = false;
    std::string body, errors;
    char buffer[16384];
    while (true) {
        ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return {kTimeout, "timeout waiting for the response"};
        if (n < 0) return {kClosed, std::string("read: ") + std::strerror(errno)};
        if (n == 0) return {kClosed, "connection closed before END_REQUEST"};
        std::span<const char> data(buffer, static_cast<size_t>(n));
        while (!data.empty()) {
            size_t consumed = 0;
            DecodeStatus status = decoder.feed(data, consumed);
            data = data.subspan(consumed);
            if (status == DecodeStatus::Error) return {kProtocol, "protocol: bad record version"};
            if (status == DecodeStatus::Again) break;
            const Record& record = decoder.record();
            if (record.request_id != id || !is_known_type(record.type))
                return {kProtocol, "protocol: unexpected record"};
            if (record.type == RecordType::Stderr) {
                errors.append(record.content.begin(), record.content.end());
            } else if (record.type == RecordType::Stdout) {
                std::span<const char> content = record.content;
                if (!header_done && !content.empty()) {
                    size_t used = 0;
                    CgiParseStatus parsed = cgi.feed(content, used);
                    if (parsed == CgiParseStatus::Error)
                        return {kBadHeader, "bad CGI header: " + std::string(cgi.error())};
                    header_done = parsed == CgiParseStatus::Done;
                    content = content.subspan(used);
                }
                body.append(content.begin(), content.end());
            } else if (record.type == RecordType::EndRequest) {
                auto end = parse_end_request(record.content);
                if (!end) return {kProtocol, "protocol: bad END_REQUEST"};
                if (!header_done) return {kBadHeader, "bad CGI header: stream ended in the header"};
                if (!data.empty()) return {kProtocol, "protocol: bytes after END_REQUEST"};
                std::printf("status %d\n", cgi.status());
                for (const Header& header : cgi.headers())
                    std::printf("header %.*s: %.*s\n", static_cast<int>(header.name.size()),
                                header.name.data(), static_cast<int>(header.value.size()),
                                header.value.data());
                std::printf("stderr-length %zu\napp-status %u\nbody-length %zu\n", errors.size(),
                            end->app_status, body.size());
                std::fwrite(body.data(), 1, body.size(), stdout);
                std::printf("\n");
                std::fwrite(errors.data(), 1, errors.size(), stderr);
                return {kOk, ""};
            } else {
                return {kProtocol, "protocol: unexpected record type"};
            }
        }
    }
}

int usage() {
    std::fprintf(stderr, "usage: fcgi_probe ADDRESS SCRIPT_FILENAME [--query Q] [--method M] "
                         "[--body-file F] [--content-type T] [--header 'N: v'] [--script-name S] "
                         "[--path-info P] [--keep-conn] [--repeat N] [--timeout-ms T]\n");
    return kUsage;
}

} // namespace

int main(int argc, char** argv) {
    Options options;
    std::vector<std::string_view> positional;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (arg == "--query") {
            options.query = value();
        } else if (arg == "--method") {
            options.method = value();
        } else if (arg == "--body-file") {
            std::ifstream file(value(), std::ios::binary);
            if (!file) return usage();
            options.body.assign(std::istreambuf_iterator<char>(file), {});
        } else if (arg == "--content-type") {
            options.content_type = value();
        } else if (arg == "--header") {
            options.headers.push_back(value());
        } else if (arg == "--script-name") {
            options.script_name = value();
        } else if (arg == "--path-info") {
            options.path_info = value();
        } else if (arg == "--keep-conn") {
            options.keep_conn = true;
        } else if (arg == "--repeat") {
            options.repeat = std::atoi(value().c_str());
        } else if (arg == "--timeout-ms") {
            options.timeout_ms = std::atoi(value().c_str());
        } else if (arg.starts_with("--")) {
            return usage();
        } else {
            positional.push_back(arg);
        }
    }
    if (positional.size() != 2 || options.repeat < 1 || options.timeout_ms < 1) return usage();
    options.address = positional[0];
    options.script_filename = positional[1];
    if (options.script_name.empty())
        options.script_name = options.script_filename.substr(options.script_filename.rfind('/'));

    UniqueFd fd;
    int connections = 0;
    for (int i = 0; i < options.repeat; ++i) {
        if (!fd || !options.keep_conn) {
            fd = connect_to(options);
            if (!fd) {
                std::fprintf(stderr, "error: cannot connect to %s: %s\n", options.address.c_str(),
                             std::strerror(errno));
                return kUsage;
            }
            ++connections;
        }
        auto id = static_cast<uint16_t>(i + 1);
        if (!send_request(fd.get(), options, id)) {
            std::fprintf(stderr, "error: send failed: %s\n", std::strerror(errno));
            return kClosed;
        }
        Failure failure = read_response(fd.get(), id);
        std::fflush(stdout);
        if (failure.code != kOk) {
            std::fprintf(stderr, "error: %s\n", failure.message.c_str());
            return failure.code;
        }
    }
    std::printf("connections %d\n", connections);
    return kOk;
}
