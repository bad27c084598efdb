// The FastCGI protocol's part of an upstream connection: BEGIN_REQUEST,
// PARAMS and STDIN out, STDOUT (the CGI response), STDERR (to the error log)
// and END_REQUEST in. Sockets, timers and the pool are upstream::Connection's.
#include "fastcgi/upstream.h"

#include "log/error_log.h"
#include "log/log_escape.h"

namespace lepus::fastcgi {
namespace {

using upstream::Failure;

constexpr upstream::ProtocolNames kNames{"FastCGI", "--fastcgi-timeout",
                                         "--fastcgi-connect-timeout"};

} // namespace

UpstreamPool::UpstreamPool(Reactor& reactor, UpstreamOptions options,
                           upstream::UpstreamGauges* gauges)
    : Pool(reactor, std::move(options), gauges, kNames) {}

std::unique_ptr<upstream::Connection> UpstreamPool::make_connection() {
    return std::make_unique<UpstreamConnection>(*this, reactor());
}

void UpstreamConnection::reset_response() {
    decoder_.reset();
    parser_.reset();
}

ParamsWriter& UpstreamConnection::begin_request(std::string_view script_name) {
    script_.assign(script_name);
    // Replayable whatever the method: a retry only happens when a pooled
    // connection was found closed before php-fpm read anything of it.
    begin(true);
    append_begin_request(wbuf_, kRequestId, Role::Responder, pool_.options().keep_alive);
    params_.begin(wbuf_, kRequestId);
    return params_;
}

void UpstreamConnection::append_body(std::span<const char> data) {
    reserve_append(data.size());
    append_stream(wbuf_, RecordType::Stdin, kRequestId, data);
}

void UpstreamConnection::end_body() {
    append_stream_end(wbuf_, RecordType::Stdin, kRequestId);
    request_done_ = true;
}

// One record a step: the pool checks back-pressure between records.
void UpstreamConnection::process_input() {
    size_t consumed = 0;
    DecodeStatus status = decoder_.feed({rbuf_.get() + rpos_, rend_ - rpos_}, consumed);
    rpos_ += consumed;
    if (status == DecodeStatus::Error) return fail(Failure::Protocol, "bad record");
    if (status == DecodeStatus::Again) return;
    handle_record(decoder_.record());
}

void UpstreamConnection::handle_record(const Record& record) {
    if (record.request_id != kRequestId)
        return fail(Failure::Protocol, "record for an unknown request id");
    switch (record.type) {
    case RecordType::Stdout: {
        std::span<const char> data = record.content;
        if (data.empty() || state_ == State::Draining) return;
        if (!head_done_) {
            size_t consumed = 0;
            CgiParseStatus status = parser_.feed(data, consumed);
            if (status == CgiParseStatus::Error) return fail_bad_head();
            if (status == CgiParseStatus::Again) return;
            head_done_ = true;
            data = data.subspan(consumed);
        }
        body_.append(data.data(), data.size());
        return;
    }
    case RecordType::Stderr:
        return log_stderr({record.content.data(), record.content.size()});
    case RecordType::EndRequest: {
        auto end = parse_end_request(record.content);
        if (!end) return fail(Failure::Protocol, "bad END_REQUEST");
        if (end->protocol_status != ProtocolStatus::RequestComplete)
            return fail(Failure::Overloaded, "request refused (protocolStatus != 0)");
        if (!head_done_ && state_ != State::Draining)
            return fail(Failure::Protocol, "response without a complete header block");
        ended_ = true;
        // §5.1 KEEP_CONN: the connection is ours again, provided nothing follows.
        reusable_ = pool_.options().keep_alive && rpos_ == rend_ && decoder_.at_record_boundary() &&
                    wsent_ == wbuf_.size();
        // Without it the response is all in body_: close now. php-fpm's child,
        // after END_REQUEST, shuts its side and reads until our close
        // (fcgi_close() in main/fastcgi.c): waiting for a slow client here would
        // keep that child from the next request.
        if (!pool_.options().keep_alive) close_socket();
        return;
    }
    default:
        return fail(Failure::Protocol, "unexpected record type");
    }
}

// One error-log line per line of the script's stderr. The bytes are the script's
// (and so often a client's: a logged header, a form field): a raw newline or ESC
// would forge log lines or drive the terminal that shows the log (issue 14), so
// they are escaped as the access log escapes. A line split across two records is
// logged as two lines; php-fpm sends whole lines in practice.
void UpstreamConnection::log_stderr(std::string_view text) {
    if (!log_enabled(LogLevel::Warn)) return;
    ScopedLogContext context(client_ ? client_->log_context : LogContext{});
    std::string script = escaped_script(), escaped;
    while (!text.empty()) {
        size_t newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        escaped.clear();
        append_log_escaped(line, escaped);
        log_warn("FastCGI stderr from \"%s\": %s", script.c_str(), escaped.c_str());
    }
}

// A header block that cannot be passed on (malformed, or a 1xx Status): one
// error-log line naming the script and the offending bytes, then 502 for the client.
void UpstreamConnection::fail_bad_head() {
    std::string reason = "bad CGI header block: ";
    reason.append(parser_.error());
    if (!parser_.error_value().empty()) {
        reason.append(" (\"");
        append_log_escaped(parser_.error_value(), reason);
        reason.append("\")");
    }
    fail(Failure::Protocol, reason.c_str());
}

// The script name comes from the request path: escaped like everything else from outside.
std::string UpstreamConnection::escaped_script() const {
    std::string escaped;
    append_log_escaped(script_, escaped);
    return escaped;
}

// An active health check: a GET of the script `path` under `root`, with the
// variables php-fpm needs to find and run it.
void UpstreamConnection::write_probe(std::string_view path, std::string_view root) {
    ParamsWriter& params = begin_request(path);
    std::string filename(root);
    filename.append(path);
    params.add("SCRIPT_FILENAME", filename);
    params.add("SCRIPT_NAME", path);
    params.add("REQUEST_URI", path);
    params.add("DOCUMENT_ROOT", root);
    params.add("REQUEST_METHOD", "GET");
    params.add("QUERY_STRING", "");
    params.add("SERVER_PROTOCOL", "HTTP/1.1");
    params.add("GATEWAY_INTERFACE", "CGI/1.1");
    params.add("HTTP_USER_AGENT", "lepus health check");
    params.finish();
    end_body();
}

std::string UpstreamConnection::log_context() const {
    if (script_.empty()) return {};
    return " (script \"" + escaped_script() + "\")";
}

} // namespace lepus::fastcgi
