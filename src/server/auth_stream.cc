#include "server/auth_stream.h"

#include "http/complete_stream.h"
#include "server/router.h"

namespace lepus {

AuthStream::AuthStream(Router& router, Exchange& exchange, const AuthRule& rule, std::string user,
                       std::shared_ptr<AuthCheck> check)
    : router_(router), exchange_(exchange), rule_(rule), user_(std::move(user)),
      check_(std::move(check)) {
    check_->waiter = this;
}

AuthStream::~AuthStream() {
    detach();
}

void AuthStream::detach() {
    if (!check_) return;
    check_->waiter = nullptr;
    check_->abandoned.store(true, std::memory_order_relaxed); // a queued check is skipped
    check_.reset();
}

size_t AuthStream::offer_body(std::span<const char> data) {
    // Until the verdict the body stays with the client (back-pressure): a
    // refused request must not have fed it to anything.
    return inner_ ? inner_->offer_body(data) : 0;
}

void AuthStream::end_body() {
    body_ended_ = true;
    if (inner_) inner_->end_body();
}

StreamState AuthStream::poll() {
    if (!inner_) {
        if (!verdict_) return StreamState::Pending;
        route();
    }
    return inner_->poll();
}

void AuthStream::on_verdict(bool granted) {
    verdict_ = granted;
    unknown_user_ = check_->unknown_user;
    check_->waiter = nullptr;
    check_.reset();
    exchange_.listener->on_exchange_progress();
}

void AuthStream::route() {
    // The router answers into the exchange, where this stream sits (or the
    // AuthStream that holds it, when a try_files target needed a check of
    // its own): step aside while it does, then take what it made as the
    // inner answer.
    std::unique_ptr<ResponseStream> current = std::move(exchange_.stream);
    exchange_.stream_fields.clear(); // the router adds the site's header rules again
    exchange_.response.reset();
    router_.resume(exchange_, *verdict_, user_, rule_, unknown_user_);
    if (exchange_.stream)
        inner_ = std::move(exchange_.stream);
    else
        inner_ = std::make_unique<CompleteStream>(exchange_.response, exchange_.request->is_head());
    exchange_.stream = std::move(current);
    if (body_ended_) inner_->end_body();
}

void AuthStream::release() {
    detach();
    if (inner_) inner_->release();
}

} // namespace lepus
