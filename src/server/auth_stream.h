// AuthStream: a request under basic auth whose credentials are not in the
// reactor's cache yet. The router answers it with this stream, which waits
// (WaitingStream) for the verifier's verdict; then the router routes the
// exchange as it would have (or answers 401) and the stream forwards to
// what that gave.
#pragma once

#include "server/basic_auth.h"
#include "server/waiting_stream.h"

#include <memory>
#include <optional>
#include <string>

namespace lepus {

class Router;

class AuthStream final : public WaitingStream, public AuthWaiter {
public:
    // `rule` lives in the site config the exchange holds; `check` is under way.
    AuthStream(Router& router, Exchange& exchange, const AuthRule& rule, std::string user,
               std::shared_ptr<AuthCheck> check);
    ~AuthStream() override;

    void on_verdict(bool granted) override;

private:
    bool wait_over() const override { return verdict_.has_value(); }
    void resume_router() override;
    void cancel_wait() override;

    Router& router_;
    const AuthRule& rule_;
    std::string user_;
    std::shared_ptr<AuthCheck> check_; // until the verdict, or the client leaves
    std::optional<bool> verdict_;
    bool unknown_user_ = false; // the check's, for the error log
};

} // namespace lepus
