// FastCgiExchange: one request answered by php-fpm, as a ResponseStream that
// a protocol engine drives. It holds the relay state of the request (the
// script, the backend connection, the buffered body of a chunked request)
// that used to live in the client connection.
//
//   first poll  -> the pool gives a backend connection, queues the request,
//                  or refuses it (Failed, 503 with Retry-After)
//                  (a php-fpm of the site's group: upstream/group.h)
//              -> a connection that could not be made (refused, or the
//                  connect timed out): the same records to the next php-fpm
//              -> BEGIN_REQUEST + PARAMS (+ the body bytes already offered
//                  + the empty STDIN when the body is complete) in one write;
//                  a Content-Length body then streams as STDIN records while
//                  it arrives (at most upstream::Connection::kSendHighWater
//                  buffered); a chunked one is kept whole first (bounded by
//                  --max-body-size in the engine), since PHP needs
//                  CONTENT_LENGTH up front, as nginx does
//              -> Ready once php-fpm's CGI header block is complete; body
//                  bytes as they come, the backend buffering at most
//                  kBodyHighWater before it stops reading php-fpm
//   release     -> the backend connection returns to its pool, or drains the
//                  rest of an abandoned response first.
//
// Failures before the head: 502 (504 for --fastcgi-timeout); after it,
// Broken (the engine closes the client connection).
#pragma once

#include "fastcgi/cgi_params.h"
#include "fastcgi/upstream.h"
#include "upstream/backend_stream.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lepus::fastcgi {

// What the router resolved for the script (copied: the resolver serves other
// requests while this one waits for a backend connection).
struct ScriptTarget {
    std::string_view document_root;
    std::string_view script_name;
    std::string_view path_info;
    std::string_view script_filename;
    std::string_view server_name; // SERVER_NAME: the site's name
    // An error page run as a script: a GET of the page without the original
    // body (nginx turns any method but HEAD into GET for it).
    bool internal_redirect = false;
    // try_files re-routed the request here: the script sees this path and
    // query (with the method, headers and body as sent; REQUEST_URI stays the
    // client's target).
    bool rewritten = false;
    std::string_view rewritten_path = {}, rewritten_query = {};
    // The configured FastCGI parameters (cgi_params.h); they must outlive the
    // exchange (the site's serving set, which the request holds, owns them).
    std::span<const CgiParam> extra_params = {};
};

class FastCgiExchange final : public upstream::BackendStream {
public:
    // Will ask a php-fpm of `group` for a backend connection for `exchange`
    // (whose request, connection and listener stay valid while the engine calls us).
    FastCgiExchange(upstream::Group& group, Exchange& exchange, const ScriptTarget& target);

    // A chunked body is kept whole before the request goes; an error page's GET has none.
    size_t offer_body(std::span<const char> data) override;
    StreamState poll() override;

private:
    void write_request(upstream::Connection& backend) override;
    void take_head(upstream::Connection& connection) override;
    // The error log's context of this request (http/exchange_log.h), for log_context.
    static void append_log_context(const void* self, std::string& out);

    const Request& request() const { return redirected_ ? *redirected_ : *exchange_.request; }

    // For an internal redirect: the request as the script sees it. Its views
    // point into the engine's buffer, which no longer moves: the body is done.
    std::optional<Request> redirected_;
    std::string rewritten_path_, rewritten_query_; // what redirected_ names after try_files
    bool drop_body_ = false;                       // an error page's GET
    std::string document_root_, script_name_, path_info_, script_filename_, server_name_;
    std::span<const CgiParam> extra_params_;
    // A body of unknown length (chunked), kept until it is complete.
    std::string whole_body_;
    bool length_known_ = true;
};

} // namespace lepus::fastcgi
