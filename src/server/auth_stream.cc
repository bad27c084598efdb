#include "server/auth_stream.h"

#include "server/router.h"

namespace lepus {

AuthStream::AuthStream(Router& router, Exchange& exchange, const AuthRule& rule, std::string user,
                       std::shared_ptr<AuthCheck> check)
    : WaitingStream(exchange), router_(router), rule_(rule), user_(std::move(user)),
      check_(std::move(check)) {
    check_->waiter = this;
}

AuthStream::~AuthStream() {
    cancel_wait();
}

void AuthStream::cancel_wait() {
    if (!check_) return;
    check_->waiter = nullptr;
    check_->abandoned.store(true, std::memory_order_relaxed); // a queued check is skipped
    check_.reset();
}

void AuthStream::on_verdict(bool granted) {
    verdict_ = granted;
    unknown_user_ = check_->unknown_user;
    check_->waiter = nullptr;
    check_.reset();
    exchange_.listener->on_exchange_progress();
}

void AuthStream::resume_router() {
    router_.resume(exchange_, *verdict_, user_, rule_, unknown_user_);
}

} // namespace lepus
