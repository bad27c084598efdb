// HttpConnection's FastCGI half: a request routed to php-fpm (Phase::Upstream).
//
//   start_fastcgi   -> the worker's UpstreamPool gives a backend connection,
//                      queues the request, or refuses it (503 + Retry-After)
//   proxy           -> BEGIN_REQUEST + PARAMS (+ the body bytes already here,
//                      + the empty STDIN when the body is complete) in one
//                      write; the rest of a Content-Length body streams as
//                      STDIN records while it arrives (at most
//                      UpstreamConnection::kStdinHighWater buffered)
//                   -> once php-fpm's CGI header block is complete, the HTTP
//                      head; then the body as it comes: Content-Length when
//                      php-fpm gave one or the whole response is already
//                      here (END_REQUEST seen), else chunked (HTTP/1.1) or
//                      close-delimited (HTTP/1.0); at most kProxyOutHighWater
//                      bytes queued for the client, the backend buffering at
//                      most kBodyHighWater more before it stops reading php-fpm
//                   -> END_REQUEST and everything sent: access log line,
//                      backend connection back to the pool, keepalive as usual.
//
// Failures before the head was sent become 502 (504 for --fastcgi-timeout);
// after it, the client connection is closed so that a torn response never
// looks complete. A client that leaves mid-request releases its backend
// connection, which drains the rest of the response and returns to the pool.
#include "base/ascii.h"
#include "fastcgi/cgi_params.h"
#include "log/error_log.h"
#include "server/http_connection.h"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>

namespace lepus {
namespace {

// Headers lepus writes itself or that describe php-fpm's connection, not ours
// (RFC 9110 §7.6.1: hop-by-hop fields are not forwarded).
bool is_own_header(std::string_view name) {
    for (std::string_view own : {"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Trailer",
                                 "Upgrade", "Proxy-Connection", "Content-Length", "Date", "Server"})
        if (ascii_iequals(name, own)) return true;
    return false;
}

void append_hex(size_t value, std::string& out) {
    char digits[16];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[value & 15];
        value >>= 4;
    } while (value);
    while (n)
        out.push_back(digits[--n]);
}

bool is_disconnect(int error) {
    return error == EPIPE || error == ECONNRESET || error == ENOTCONN || error == ETIMEDOUT;
}

} // namespace

HttpConnection::Step HttpConnection::start_fastcgi() {
    RequestState& s = *state_;
    request_sent_ = proxy_head_built_ = proxy_chunked_ = proxy_has_length_ = false;
    proxy_no_body_ = proxy_finished_ = proxy_blocked_ = false;
    proxy_status_ = 0;
    proxy_remaining_ = proxy_head_size_ = proxy_bytes_sent_ = 0;
    s.proxy_out.clear();
    s.proxy_sent = 0;
    error_response_ = false;
    set_phase(Phase::Upstream);
    serving_->pool_of(*s.site).acquire(*this);
    return Step::Continue;
}

const Request& HttpConnection::request_views() {
    RequestState& s = *state_;
    if (head_moved_) {
        // The buffer moved under the views while body bytes were read.
        s.parser.reset();
        s.parser.parse({s.input.data() + s.input_begin, head_size_});
        head_moved_ = false;
    }
    return s.parser.request();
}

HttpConnection::Step HttpConnection::proxy() {
    upstream_progress_ = false;
    if (upstream_refused()) {
        // Overload must not flood the log as well: one line per second per reactor.
        static thread_local time_t last_warning = 0;
        if (reactor_.now_s() != last_warning) {
            last_warning = reactor_.now_s();
            log_warn("FastCGI: every backend connection of reactor %zu is busy and its queue is "
                     "full or the wait timed out: 503",
                     reactor_.index());
        }
        return respond_fastcgi_error(503, "Retry-After: 1\r\n");
    }
    if (upstream_queued()) return Step::Wait;
    fastcgi::UpstreamConnection* upstream = this->upstream();
    if (!upstream) return respond_fastcgi_error(502);
    if (!request_sent_) {
        send_fastcgi_request(*upstream);
        request_sent_ = true;
    }
    if (upstream->failure() == fastcgi::UpstreamFailure::None) {
        if (upload_body(*upstream) == Step::Close) return Step::Close;
    }
    if (upstream->failure() != fastcgi::UpstreamFailure::None)
        return upstream_failed(upstream->failure());
    if (rdhup_ && body_remaining_ == 0 && !proxy_finished_) {
        // The client shut its side while the script runs. Nothing pending
        // means it left (a pipelined request would be waiting here): stop
        // now, and let the backend connection drain back into the pool.
        char byte;
        if (recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return Step::Close;
    }
    if (!proxy_head_built_) {
        if (!upstream->head_ready()) return Step::Wait;
        build_proxy_head(*upstream);
    }
    for (;;) {
        if (!relay_body(*upstream)) {
            log_error("FastCGI response of \"%s\" ended %llu bytes short of its Content-Length: "
                      "closing the client connection",
                      state_->script_name.c_str(),
                      static_cast<unsigned long long>(proxy_remaining_));
            return Step::Close;
        }
        Step step = write_proxy();
        if (step != Step::Continue) return step;
        if (proxy_finished_) break;
        if (upstream->body().empty()) {
            // Reading resumed inside consume_body() may have met the failure.
            if (upstream->failure() != fastcgi::UpstreamFailure::None)
                return upstream_failed(upstream->failure());
            return Step::Wait; // php-fpm has not said more yet
        }
    }
    request_views();
    log_access(proxy_status_, proxy_bytes_sent_ - proxy_head_size_);
    fastcgi_ = false;
    upstream->release();
    if (body_remaining_ > 0) keep_alive_ = false; // answered before the body was all read
    return finish_response();
}

void HttpConnection::send_fastcgi_request(fastcgi::UpstreamConnection& upstream) {
    RequestState& s = *state_;
    const Request& request = request_views();
    if (!have_local_) {
        local_.length = sizeof local_.storage;
        getsockname(fd_.get(), &local_.storage.any, &local_.length);
        have_local_ = true;
    }
    std::optional<uint64_t> length = request.content_length;
    if (body_chunked_) length = s.fastcgi_body.size();
    fastcgi::CgiContext context{.request = request,
                                .document_root = s.site->scripts->document_root(),
                                .script_name = s.script_name,
                                .path_info = s.path_info,
                                .script_filename = s.script_filename,
                                .remote = peer_,
                                .local = local_,
                                .server_name = {},
                                .content_length = length};
    fastcgi::ParamsWriter& params = upstream.begin_request(s.script_name);
    fastcgi::append_cgi_params(params, context);
    params.finish();
    if (body_chunked_) {
        if (!s.fastcgi_body.empty()) upstream.append_stdin(s.fastcgi_body);
        upstream.end_stdin();
        s.fastcgi_body.clear();
    } else if (body_remaining_ == 0) {
        upstream.end_stdin();
    }
    // upload_body adds the body bytes already received, then the one write.
}

HttpConnection::Step HttpConnection::upload_body(fastcgi::UpstreamConnection& upstream) {
    RequestState& s = *state_;
    while (body_remaining_ > 0 && upstream.failure() == fastcgi::UpstreamFailure::None) {
        if (upstream.stdin_full()) {
            // Send before reading more: a send that empties the buffer raises
            // no EPOLLOUT edge to bring us back.
            upstream.flush();
            if (upstream.stdin_full()) break;
        }
        size_t body_start = s.input_begin + head_size_;
        size_t available = s.input_end - body_start;
        if (available > 0) {
            size_t take = size_t(std::min<uint64_t>(available, body_remaining_));
            take = std::min(take, fastcgi::UpstreamConnection::kStdinHighWater);
            upstream.append_stdin({s.input.data() + body_start, take});
            // Consumed in place: what follows (a pipelined request) stays after the head.
            std::memmove(s.input.data() + body_start, s.input.data() + body_start + take,
                         available - take);
            s.input_end -= take;
            body_remaining_ -= take;
            if (body_remaining_ == 0) upstream.end_stdin();
            continue;
        }
        if (peer_closed_) return Step::Close; // the client left mid-body
        if (!readable_) break;
        Step step = fill_input();
        if (step == Step::Close) return step;
        if (step == Step::Wait) break;
    }
    upstream.flush();
    return Step::Continue;
}

void HttpConnection::build_proxy_head(const fastcgi::UpstreamConnection& upstream) {
    RequestState& s = *state_;
    const Request& request = request_views();
    const fastcgi::CgiResponseParser& cgi = upstream.head();
    proxy_status_ = cgi.status();
    Response& response = s.response;
    response.reset();
    begin_head(proxy_status_, reactor_.now_s(), response);
    for (const Header& header : cgi.headers()) {
        if (is_own_header(header.name)) continue;
        response.head.append(header.name).append(": ").append(header.value).append("\r\n");
    }
    // RFC 9110 §6.4.1: no content for HEAD, 1xx, 204 and 304.
    proxy_no_body_ =
        request.is_head() || proxy_status_ < 200 || proxy_status_ == 204 || proxy_status_ == 304;
    std::optional<uint64_t> length = cgi.content_length();
    // The whole response is already here (the common case for a small page):
    // send it with a length, which saves the chunk framing and keeps HTTP/1.0
    // keep-alive clients connected. HEAD is left alone: its length would be 0.
    if (!length && upstream.ended() && !request.is_head()) length = upstream.body().size();
    if (length) {
        proxy_has_length_ = true;
        proxy_remaining_ = *length;
        if (proxy_status_ != 204 && proxy_status_ != 304) {
            response.head.append("Content-Length: ");
            append_decimal(*length, response.head);
            response.head.append("\r\n");
        }
    } else if (!proxy_no_body_) {
        if (request.version_minor >= 1) {
            response.head.append("Transfer-Encoding: chunked\r\n");
            proxy_chunked_ = true;
        } else {
            keep_alive_ = false; // RFC 9112 §6.3: the body ends when the connection closes
        }
    }
    finish_head(keep_alive_, request.version_minor, response);
    s.proxy_out.assign(response.head);
    s.proxy_sent = 0;
    proxy_head_size_ = response.head.size();
    proxy_head_built_ = true;
}

// Moves body bytes from the backend into proxy_out (framed), within the bound.
// False when the response ended short of its Content-Length.
bool HttpConnection::relay_body(fastcgi::UpstreamConnection& upstream) {
    RequestState& s = *state_;
    for (std::span<const char> data = upstream.body(); !data.empty(); data = upstream.body()) {
        if (s.proxy_out.size() - s.proxy_sent >= kProxyOutHighWater) return true;
        if (s.proxy_sent > 0) {
            s.proxy_out.erase(0, s.proxy_sent);
            s.proxy_sent = 0;
        }
        size_t take = std::min(data.size(), kProxyOutHighWater);
        size_t keep = proxy_no_body_ ? 0 : take;
        if (proxy_has_length_ && keep > proxy_remaining_) {
            log_warn("FastCGI response of \"%s\" is longer than its Content-Length: extra "
                     "bytes dropped",
                     s.script_name.c_str());
            keep = size_t(proxy_remaining_);
        }
        if (proxy_has_length_) proxy_remaining_ -= keep;
        if (keep > 0) {
            if (proxy_chunked_) {
                append_hex(keep, s.proxy_out);
                s.proxy_out.append("\r\n");
            }
            s.proxy_out.append(data.data(), keep);
            if (proxy_chunked_) s.proxy_out.append("\r\n");
        }
        upstream.consume_body(take);
    }
    if (upstream.ended() && upstream.body().empty() && !proxy_finished_) {
        if (proxy_has_length_ && proxy_remaining_ > 0 && !proxy_no_body_) return false;
        if (proxy_chunked_) s.proxy_out.append("0\r\n\r\n"); // RFC 9112 §7.1: last chunk
        proxy_finished_ = true;
    }
    return true;
}

HttpConnection::Step HttpConnection::write_proxy() {
    RequestState& s = *state_;
    while (s.proxy_sent < s.proxy_out.size()) {
        if (bytes_this_pass_ >= kMaxBytesPerPass) return Step::Yield;
        ssize_t n = ::send(fd_.get(), s.proxy_out.data() + s.proxy_sent,
                           s.proxy_out.size() - s.proxy_sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                proxy_blocked_ = true;
                return Step::Wait;
            }
            if (!is_disconnect(errno))
                log_info("send to %s: %s", peer_.to_string().c_str(), strerror(errno));
            return Step::Close;
        }
        s.proxy_sent += size_t(n);
        proxy_bytes_sent_ += uint64_t(n);
        bytes_this_pass_ += uint64_t(n);
    }
    proxy_blocked_ = false;
    s.proxy_out.clear();
    s.proxy_sent = 0;
    return Step::Continue;
}

HttpConnection::Step HttpConnection::upstream_failed(fastcgi::UpstreamFailure failure) {
    if (proxy_head_built_) {
        // Part of the response is out: a complete-looking one must not follow.
        log_error("FastCGI response of \"%s\" broke off after its head was sent: closing the "
                  "client connection",
                  state_->script_name.c_str());
        return Step::Close;
    }
    return respond_fastcgi_error(failure == fastcgi::UpstreamFailure::Timeout ? 504 : 502);
}

HttpConnection::Step HttpConnection::respond_fastcgi_error(int status,
                                                           std::string_view extra_headers) {
    RequestState& s = *state_;
    if (fastcgi::UpstreamConnection* upstream = this->upstream()) upstream->release();
    const Request& request = request_views();
    if (body_remaining_ > 0) keep_alive_ = false; // the rest of the body is not worth reading
    ReplyContext context;
    context.now = reactor_.now_s();
    context.keep_alive = keep_alive_;
    context.head_request = request.is_head();
    context.version_minor = request.version_minor;
    s.response.reset();
    build_error_response(status, context, s.response, extra_headers);
    apply_site_error_page(request, s.response);
    keep_alive_ = s.response.keep_alive;
    error_response_ = false;
    fastcgi_ = false;
    proxy_blocked_ = false;
    log_access(status, s.response.body_bytes());
    head_sent_ = body_sent_ = 0;
    set_phase(Phase::Writing);
    return Step::Continue;
}

} // namespace lepus
