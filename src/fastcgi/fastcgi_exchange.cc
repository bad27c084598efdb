#include "fastcgi/fastcgi_exchange.h"

#include "fastcgi/cgi_params.h"
#include "http/exchange_log.h"
#include "log/error_log.h"

#include <algorithm>

namespace lepus::fastcgi {

FastCgiExchange::FastCgiExchange(upstream::Group& group, Exchange& exchange,
                                 const ScriptTarget& target)
    : BackendStream(group, exchange), document_root_(target.document_root),
      script_name_(target.script_name), path_info_(target.path_info),
      script_filename_(target.script_filename), server_name_(target.server_name),
      extra_params_(target.extra_params) {
    if (target.rewritten) {
        rewritten_path_.assign(target.rewritten_path);
        rewritten_query_.assign(target.rewritten_query);
        Request& rewritten = redirected_.emplace(*exchange.request);
        rewritten.path = rewritten_path_;
        rewritten.query = rewritten_query_;
    }
    if (target.internal_redirect) {
        Request& fetch = redirected_ ? *redirected_ : redirected_.emplace(*exchange.request);
        if (!fetch.is_head()) fetch.method = Method::Get;
        fetch.method_text = method_name(fetch.method);
        fetch.content_length.reset();
        fetch.chunked = false;
        drop_body_ = true;
    }
    length_known_ = !request().chunked;
    log_context = {&FastCgiExchange::append_log_context, this};
}

// The pool is read when a line is written: after a fail-over it names the new php-fpm.
void FastCgiExchange::append_log_context(const void* self, std::string& out) {
    const auto& exchange = *static_cast<const FastCgiExchange*>(self);
    append_exchange_context(exchange.exchange_, exchange.server_name_,
                            exchange.pool_->options().address.text, out);
}

size_t FastCgiExchange::offer_body(std::span<const char> data) {
    if (drop_body_) return data.size(); // the error page's GET has no body
    if (!length_known_) {
        whole_body_.append(data.data(), data.size());
        return data.size();
    }
    UpstreamConnection* upstream = this->upstream();
    if (!request_sent_ || !upstream || upstream->failure() != UpstreamFailure::None) return 0;
    if (upstream->stdin_full()) {
        // Send before taking more: a send that empties the buffer raises no
        // EPOLLOUT edge to bring us back.
        upstream->flush();
        if (upstream->stdin_full()) return 0;
    }
    size_t take = std::min(data.size(), UpstreamConnection::kStdinHighWater);
    upstream->append_stdin(data.first(take));
    return take;
}

void FastCgiExchange::end_body() {
    body_ended_ = true;
    UpstreamConnection* upstream = this->upstream();
    if (request_sent_ && upstream && upstream->failure() == UpstreamFailure::None) {
        upstream->end_stdin();
        upstream->flush();
    }
}

StreamState FastCgiExchange::poll() {
    // A body of unknown length goes once it is whole (CONTENT_LENGTH first):
    // no connection is taken before.
    if (!length_known_ && !body_ended_) return StreamState::Pending;
    if (StreamState state = send(); state != StreamState::Ready) return state;
    UpstreamConnection* upstream = this->upstream();
    if (!upstream->head_ready()) return StreamState::Pending;
    if (!head_reported_) {
        const CgiResponseParser& cgi = upstream->head();
        head_.status = cgi.status();
        head_.headers = cgi.headers();
        head_.content_length = cgi.content_length();
        head_reported_ = true;
    }
    return StreamState::Ready;
}

void FastCgiExchange::write_request(upstream::Connection& backend) {
    auto& upstream = static_cast<UpstreamConnection&>(backend);
    if (!resend_.empty()) {
        upstream.resend(script_name_, std::move(resend_), resend_complete_);
        std::string().swap(resend_);
        if (body_ended_ && !resend_complete_) upstream.end_stdin();
        return;
    }
    const Request& request = this->request();
    ConnectionInfo& connection = *exchange_.connection;
    std::optional<uint64_t> length = request.content_length;
    if (!length_known_) length = whole_body_.size();
    CgiContext context{.request = request,
                       .document_root = document_root_,
                       .script_name = script_name_,
                       .path_info = path_info_,
                       .script_filename = script_filename_,
                       .remote = exchange_.client,
                       .local = connection.local(),
                       .server_name = server_name_,
                       .content_length = length,
                       .https = connection.secure,
                       .ssl_protocol = connection.tls_protocol,
                       .ssl_cipher = connection.tls_cipher,
                       .remote_user = exchange_.remote_user,
                       .extra_params = extra_params_};
    ParamsWriter& params = upstream.begin_request(script_name_);
    append_cgi_params(params, context);
    params.finish();
    if (!length_known_ && !whole_body_.empty()) {
        upstream.append_stdin(whole_body_);
        std::string().swap(whole_body_);
    }
    if (body_ended_) upstream.end_stdin();
    // The engine offers the body bytes already received next, then one write.
}

} // namespace lepus::fastcgi
