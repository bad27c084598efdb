#include "fastcgi/fastcgi_exchange.h"

#include "fastcgi/cgi_params.h"
#include "http/exchange_log.h"
#include "log/error_log.h"

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
    return BackendStream::offer_body(data);
}

StreamState FastCgiExchange::poll() {
    // A body of unknown length goes once it is whole (CONTENT_LENGTH first):
    // no connection is taken before.
    if (!length_known_ && !body_ended_) return StreamState::Pending;
    return BackendStream::poll();
}

void FastCgiExchange::take_head(upstream::Connection& connection) {
    const CgiResponseParser& cgi = static_cast<UpstreamConnection&>(connection).head();
    head_.status = cgi.status();
    head_.headers = cgi.headers();
    head_.content_length = cgi.content_length();
}

void FastCgiExchange::write_request(upstream::Connection& backend) {
    auto& upstream = static_cast<UpstreamConnection&>(backend);
    if (!resend_.empty()) {
        upstream.resend(script_name_, std::move(resend_), resend_complete_);
        std::string().swap(resend_);
        if (body_ended_ && !resend_complete_) upstream.end_body();
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
        upstream.append_body(whole_body_);
        std::string().swap(whole_body_);
    }
    if (body_ended_) upstream.end_body();
    // The engine offers the body bytes already received next, then one write.
}

} // namespace lepus::fastcgi
