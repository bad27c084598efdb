// fcgi_responder: a small FastCGI responder that misbehaves on demand, the test
// peer for lepus's FastCGI client (in the spirit of lighttpd's tests/fcgi-responder.c
// and nginx-tests' fastcgi_keepalive.t).
//
//   fcgi_responder --listen unix:/path | HOST:PORT [--split N] [--pause-ms M]
//
// Prints "listening ADDRESS" once ready (port 0 gets the real port), then serves
// until SIGTERM, when it prints "connections N" and exits 0. Single-threaded:
// one poll() loop over all connections with per-connection state, so a slow or
// silent request never holds up the others. One request at a time per connection
// (a second BEGIN_REQUEST gets CANT_MPX_CONN); KEEP_CONN is honoured. Each request
// is answered according to its QUERY_STRING, once its STDIN stream has ended:
//   mode=echo (default)  JSON of the params received, STDIN length and FNV-1a 64 hash
//   mode=big&size=N      N bytes of body ('a' + i % 26)
//   mode=status          Status: 201 Created and X-Custom: yes
//   mode=slow&ms=M       answers (like echo) after M ms, serving others meanwhile
//   mode=garbage         a record with version 9, then closes
//   mode=close           headers and part of the body, then closes (no END_REQUEST)
//   mode=torn            headers at once; 200 ms later part of the body, then closes
//   mode=never           reads the request, never answers
//   mode=stderr          a STDERR record, then a normal answer
//   mode=count           "connections=N" (connections accepted so far)
//   mode=short           Content-Length: 100, 5 body bytes, then a clean END_REQUEST
// With --split N every write() carries at most N bytes, and M ms pass between them.
#include "base/unique_fd.h"
#include "fastcgi/protocol.h"
#include "net/socket.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

using namespace lepus;
using namespace lepus::fastcgi;

namespace {

struct Options {
    std::string listen;
    size_t split = 0;
    int pause_ms = 0;
};

int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

struct Connection {
    UniqueFd fd;
    RecordDecoder decoder;
    // The request in progress.
    bool active = false;
    uint16_t request_id = 0;
    bool keep_conn = false;
    std::string params;
    uint64_t stdin_length = 0;
    uint64_t stdin_hash = 14695981039346656037ull; // FNV-1a 64 offset basis
    int64_t answer_at = -1;                        // mode=slow: when to answer
    int64_t tail_at = -1;                          // mode=torn: when to send the rest
    // Output.
    std::string out;
    size_t out_pos = 0;
    int64_t write_at = 0; // --pause-ms: no write before this time
    bool close_after_write = false;
    bool closed = false;
};

class Responder {
public:
    explicit Responder(Options options) : options_(std::move(options)) {}
    int run();

private:
    bool open_listener_socket();
    void accept_all();
    void read_from(Connection& conn);
    void handle_record(Connection& conn, const Record& record);
    void dispatch(Connection& conn);
    void answer(Connection& conn, std::string_view head, std::string_view body);
    void finish_request(Connection& conn);
    void write_to(Connection& conn);
    std::string echo_body(const Connection& conn) const;

    Options options_;
    UniqueFd listener_;
    UniqueFd signals_;
    std::vector<std::unique_ptr<Connection>> connections_;
    uint64_t accepted_ = 0;
};

std::string_view query_arg(std::string_view query, std::string_view key) {
    while (!query.empty()) {
        size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        if (pair.size() > key.size() && pair.substr(0, key.size()) == key &&
            pair[key.size()] == '=')
            return pair.substr(key.size() + 1);
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
    return {};
}

uint64_t to_number(std::string_view text) {
    uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') break;
        value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    return value;
}

void append_json_string(std::string& out, std::string_view text) {
    out.push_back('"');
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
            out.append(escaped);
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
}

bool Responder::open_listener_socket() {
    std::string_view listen = options_.listen;
    if (listen.starts_with("unix:")) {
        std::string path(listen.substr(5));
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (path.empty() || path.size() >= sizeof address.sun_path) return false;
        std::memcpy(address.sun_path, path.data(), path.size());
        listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        ::unlink(path.c_str());
        if (!listener_ ||
            ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener_.get(), 128) != 0) {
            std::perror("fcgi_responder: unix socket");
            return false;
        }
        std::printf("listening %s\n", options_.listen.c_str());
    } else {
        auto address = parse_listen_address(listen);
        std::string error;
        if (address) listener_ = open_listener(*address, {}, error);
        if (!listener_) {
            std::fprintf(stderr, "fcgi_responder: cannot listen on %s %s\n",
                         options_.listen.c_str(), error.c_str());
            return false;
        }
        std::printf("listening %s\n", local_address(listener_.get()).to_string().c_str());
    }
    std::fflush(stdout);
    return true;
}

int Responder::run() {
    std::signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    signals_.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!signals_ || !open_listener_socket()) return 1;

    std::vector<pollfd> fds;
    while (true) {
        int64_t now = now_ms();
        int timeout = -1;
        auto wait_until = [&](int64_t when) {
            int delay = static_cast<int>(std::max<int64_t>(0, when - now));
            timeout = timeout < 0 ? delay : std::min(timeout, delay);
        };
        fds.clear();
        fds.push_back({signals_.get(), POLLIN, 0});
        fds.push_back({listener_.get(), POLLIN, 0});
        for (auto& conn : connections_) {
            short events = POLLIN;
            if (conn->out_pos < conn->out.size()) {
                if (conn->write_at <= now)
                    events |= POLLOUT;
                else
                    wait_until(conn->write_at);
            }
            if (conn->answer_at >= 0) wait_until(conn->answer_at);
            if (conn->tail_at >= 0) wait_until(conn->tail_at);
            fds.push_back({conn->fd.get(), events, 0});
        }
        if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
            std::perror("fcgi_responder: poll");
            return 1;
        }
        if (fds[0].revents & POLLIN) {
            std::printf("connections %llu\n", static_cast<unsigned long long>(accepted_));
            std::fflush(stdout);
            if (options_.listen.starts_with("unix:")) ::unlink(options_.listen.c_str() + 5);
            return 0;
        }
        now = now_ms();
        for (size_t i = 0; i < connections_.size(); ++i) {
            Connection& conn = *connections_[i];
            short revents = fds[i + 2].revents;
            if (revents & (POLLIN | POLLHUP | POLLERR)) read_from(conn);
            if (!conn.closed && conn.answer_at >= 0 && conn.answer_at <= now) {
                conn.answer_at = -1;
                answer(conn, "Content-Type: application/json\r\n", echo_body(conn));
            }
            if (!conn.closed && conn.tail_at >= 0 && conn.tail_at <= now) {
                conn.tail_at = -1;
                append_stream(conn.out, RecordType::Stdout, conn.request_id,
                              std::string_view("only ten.."));
                conn.close_after_write = true;
            }
            if (!conn.closed) write_to(conn);
        }
        std::erase_if(connections_, [](const auto& conn) { return conn->closed; });
        if (fds[1].revents & POLLIN) accept_all();
    }
}

void Responder::accept_all() {
    while (true) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; // EAGAIN, or a transient error: poll again
        ++accepted_;
        auto conn = std::make_unique<Connection>();
        conn->fd.reset(fd);
        connections_.push_back(std::move(conn));
    }
}

void Responder::read_from(Connection& conn) {
    char buffer[65536];
    while (!conn.closed) {
        ssize_t n = ::read(conn.fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            conn.closed = true; // the client went away (or an error): drop everything
            return;
        }
        std::span<const char> data(buffer, static_cast<size_t>(n));
        while (!conn.closed && !data.empty()) {
            size_t consumed = 0;
            DecodeStatus status = conn.decoder.feed(data, consumed);
            data = data.subspan(consumed);
            if (status == DecodeStatus::Error) {
                std::fprintf(stderr, "fcgi_responder: bad record from the client\n");
                conn.closed = true;
                return;
            }
            if (status == DecodeStatus::Again) break;
            handle_record(conn, conn.decoder.record());
        }
    }
}

void Responder::handle_record(Connection& conn, const Record& record) {
    if (!is_known_type(record.type)) {
        append_unknown_type(conn.out, static_cast<uint8_t>(record.type)); // §4.2
        return;
    }
    if (record.type == RecordType::GetValues) {
        // §4.1: answer the variables we know, with our values.
        std::string values;
        NameValueReader reader(record.content);
        std::string_view name, value;
        while (reader.next(name, value)) {
            if (name == "FCGI_MAX_CONNS" || name == "FCGI_MAX_REQS")
                append_name_value(values, name, "100");
            else if (name == "FCGI_MPXS_CONNS")
                append_name_value(values, name, "0");
        }
        append_stream(conn.out, RecordType::GetValuesResult, 0, values);
        if (values.empty()) append_stream_end(conn.out, RecordType::GetValuesResult, 0);
        return;
    }
    if (record.type == RecordType::BeginRequest) {
        auto begin = parse_begin_request(record.content);
        if (conn.active || !begin) {
            append_end_request(conn.out, record.request_id,
                               {0, ProtocolStatus::CantMultiplexConnection});
            return;
        }
        if (begin->role != Role::Responder) {
            append_end_request(conn.out, record.request_id, {0, ProtocolStatus::UnknownRole});
            if (!begin->keep_conn) conn.close_after_write = true;
            return;
        }
        conn.active = true;
        conn.request_id = record.request_id;
        conn.keep_conn = begin->keep_conn;
        conn.params.clear();
        conn.stdin_length = 0;
        conn.stdin_hash = 14695981039346656037ull;
        return;
    }
    if (!conn.active || record.request_id != conn.request_id) return; // §3.3: ignore
    switch (record.type) {
    case RecordType::AbortRequest:
        conn.answer_at = -1;
        finish_request(conn);
        break;
    case RecordType::Params:
        conn.params.append(record.content.begin(), record.content.end());
        break;
    case RecordType::Stdin:
        if (record.content.empty()) {
            dispatch(conn);
            break;
        }
        conn.stdin_length += record.content.size();
        for (char c : record.content) {
            conn.stdin_hash ^= static_cast<unsigned char>(c);
            conn.stdin_hash *= 1099511628211ull; // FNV-1a 64 prime
        }
        break;
    default:
        break;
    }
}

std::string params_value(const std::string& params, std::string_view wanted) {
    NameValueReader reader(params);
    std::string_view name, value;
    while (reader.next(name, value))
        if (name == wanted) return std::string(value);
    return {};
}

void Responder::dispatch(Connection& conn) {
    std::string query = params_value(conn.params, "QUERY_STRING");
    std::string_view mode = query_arg(query, "mode");
    if (mode == "big") {
        std::string body(to_number(query_arg(query, "size")), '\0');
        for (size_t i = 0; i < body.size(); ++i)
            body[i] = static_cast<char>('a' + i % 26);
        answer(conn, "Content-Type: application/octet-stream\r\n", body);
    } else if (mode == "status") {
        answer(conn, "Status: 201 Created\r\nX-Custom: yes\r\nContent-Type: text/plain\r\n",
               "created\n");
    } else if (mode == "slow") {
        conn.answer_at = now_ms() + static_cast<int64_t>(to_number(query_arg(query, "ms")));
    } else if (mode == "garbage") {
        auto header = encode_header({9, RecordType::Stdout, conn.request_id, 8, 0});
        conn.out.append(header.data(), header.size());
        conn.out.append("garbage!");
        conn.close_after_write = true;
    } else if (mode == "close") {
        std::string_view part = "Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly ten..";
        append_stream(conn.out, RecordType::Stdout, conn.request_id, part);
        conn.close_after_write = true;
    } else if (mode == "torn") {
        append_stream(conn.out, RecordType::Stdout, conn.request_id,
                      std::string_view("Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n"));
        conn.tail_at = now_ms() + 200;
    } else if (mode == "never") {
        // Keep the request active and say nothing: the client's timeout must fire.
    } else if (mode == "stderr") {
        append_stream(conn.out, RecordType::Stderr, conn.request_id,
                      std::string_view("PHP Warning: from fcgi_responder\n"));
        append_stream_end(conn.out, RecordType::Stderr, conn.request_id);
        answer(conn, "Content-Type: text/plain\r\n", "after stderr\n");
    } else if (mode == "short") {
        answer(conn, "Content-Type: text/plain\r\nContent-Length: 100\r\n", "short");
    } else if (mode == "count") {
        answer(conn, "Content-Type: text/plain\r\n",
               "connections=" + std::to_string(accepted_) + "\n");
    } else {
        answer(conn, "Content-Type: application/json\r\n", echo_body(conn));
    }
}

std::string Responder::echo_body(const Connection& conn) const {
    std::string body = "{\"params\": {";
    NameValueReader reader(conn.params);
    std::string_view name, value;
    bool first = true;
    while (reader.next(name, value)) {
        if (!first) body.append(", ");
        first = false;
        append_json_string(body, name);
        body.append(": ");
        append_json_string(body, value);
    }
    char tail[128];
    std::snprintf(tail, sizeof tail, "}, \"stdin_length\": %llu, \"stdin_fnv1a64\": \"%016llx\"}\n",
                  static_cast<unsigned long long>(conn.stdin_length),
                  static_cast<unsigned long long>(conn.stdin_hash));
    body.append(tail);
    return body;
}

void Responder::answer(Connection& conn, std::string_view head, std::string_view body) {
    std::string stdout_bytes(head);
    stdout_bytes.append("\r\n");
    stdout_bytes.append(body);
    append_stream(conn.out, RecordType::Stdout, conn.request_id, stdout_bytes);
    append_stream_end(conn.out, RecordType::Stdout, conn.request_id);
    finish_request(conn);
}

void Responder::finish_request(Connection& conn) {
    append_end_request(conn.out, conn.request_id, {0, ProtocolStatus::RequestComplete});
    conn.active = false;
    // §5.1: without KEEP_CONN the application closes after END_REQUEST.
    if (!conn.keep_conn) conn.close_after_write = true;
}

void Responder::write_to(Connection& conn) {
    while (conn.out_pos < conn.out.size() && conn.write_at <= now_ms()) {
        size_t length = conn.out.size() - conn.out_pos;
        if (options_.split > 0) length = std::min(length, options_.split);
        ssize_t n = ::write(conn.fd.get(), conn.out.data() + conn.out_pos, length);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n < 0) {
            conn.closed = true;
            return;
        }
        conn.out_pos += static_cast<size_t>(n);
        if (options_.split > 0 && options_.pause_ms > 0)
            conn.write_at = now_ms() + options_.pause_ms;
    }
    if (conn.out_pos == conn.out.size()) {
        conn.out.clear();
        conn.out_pos = 0;
        if (conn.close_after_write) conn.closed = true;
    }
}

int usage() {
    std::fprintf(stderr,
                 "usage: fcgi_responder --listen unix:/path|HOST:PORT [--split N --pause-ms M]\n");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (i + 1 >= argc) return usage();
        if (arg == "--listen")
            options.listen = argv[++i];
        else if (arg == "--split")
            options.split = to_number(argv[++i]);
        else if (arg == "--pause-ms")
            options.pause_ms = static_cast<int>(to_number(argv[++i]));
        else
            return usage();
    }
    if (options.listen.empty()) return usage();
    return Responder(std::move(options)).run();
}
