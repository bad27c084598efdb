// The FastCGI protocol on upstream::Pool (upstream/pool.h): a connection that
// writes BEGIN_REQUEST, PARAMS and STDIN records and reads STDOUT, STDERR and
// END_REQUEST (protocol.h), the CGI header block parsed by cgi_response.h.
//
// By default each request opens its own connection, closed as soon as
// END_REQUEST is read (no FCGI_KEEP_CONN, as nginx does): php-fpm binds a child
// to every connection it has accepted, so a kept-alive connection it has not
// accepted (more connections than pm.max_children) would hold its request in
// the listen backlog until --fastcgi-timeout (issue 32). With keep_alive
// (--fastcgi-keepalive on) connections return to an idle pool after END_REQUEST
// instead; the pool must then stay at or below pm.max_children.
#pragma once

#include "fastcgi/cgi_response.h"
#include "fastcgi/protocol.h"
#include "upstream/pool.h"

#include <span>
#include <string>
#include <string_view>

namespace lepus::fastcgi {

// The pool's settings; keep_alive is --fastcgi-keepalive (FCGI_KEEP_CONN and an idle pool).
using UpstreamOptions = upstream::PoolOptions;
using UpstreamFailure = upstream::Failure;
using UpstreamClient = upstream::Client;

class UpstreamConnection final : public upstream::Connection {
public:
    static constexpr uint16_t kRequestId = 1;

    using Connection::Connection;

    // --- the request (client side) ---
    // Starts the request: BEGIN_REQUEST (KEEP_CONN with keep_alive) and an open PARAMS stream in
    // the write buffer. The caller adds the variables and calls finish().
    ParamsWriter& begin_request(std::string_view script_name);
    // Starts the request with the records another connection could not send.
    void resend(std::string_view script_name, std::string records, bool complete) {
        script_.assign(script_name);
        begin_with(std::move(records), true, complete);
    }
    // Appends STDIN records carrying `data` (copied).
    void append_body(std::span<const char> data) override;
    // Appends the empty STDIN record that ends the body.
    void end_body() override;

    // --- the response ---
    // The CGI header block is complete (head_ready()): head() holds status and headers.
    const CgiResponseParser& head() const { return parser_; }

private:
    void reset_response() override;
    void process_input() override;
    std::string log_context() const override;
    void write_probe(std::string_view path, std::string_view root) override;
    int response_status() const override { return parser_.status(); }
    void handle_record(const Record& record);
    void fail_bad_head();
    void log_stderr(std::string_view text);
    std::string escaped_script() const;

    ParamsWriter params_;
    std::string script_; // for STDERR and failure log lines
    RecordDecoder decoder_;
    CgiResponseParser parser_;
};

// The per-reactor pool of connections to one php-fpm.
class UpstreamPool final : public upstream::Pool {
public:
    // `gauges` (optional) must outlive the pool.
    UpstreamPool(Reactor& reactor, UpstreamOptions options,
                 upstream::UpstreamGauges* gauges = nullptr);

private:
    std::unique_ptr<upstream::Connection> make_connection() override;
};

} // namespace lepus::fastcgi
