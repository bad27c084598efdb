// AuthStream: a request under basic auth whose credentials are not in the
// reactor's cache yet. The router answers it with this stream, which stays
// Pending (taking none of the request body) until the verifier's verdict
// arrives; then the router routes the exchange as it would have (or answers
// 401), and the stream forwards to what that gave: the inner stream (PHP),
// or the complete response (a static file, a redirect, an error page) as a
// CompleteStream. No engine knows the difference, HTTP/1.1 or HTTP/2.
#pragma once

#include "http/exchange.h"
#include "server/basic_auth.h"

#include <memory>
#include <optional>
#include <string>

namespace lepus {

class Router;

class AuthStream final : public ResponseStream, public AuthWaiter {
public:
    // `rule` lives in the site config the exchange holds; `check` is under way.
    AuthStream(Router& router, Exchange& exchange, const AuthRule& rule, std::string user,
               std::shared_ptr<AuthCheck> check);
    ~AuthStream() override;

    size_t offer_body(std::span<const char> data) override;
    void end_body() override;
    StreamState poll() override;
    const StreamHead& head() const override { return inner_->head(); }
    std::span<const char> body() const override { return inner_->body(); }
    void consume(size_t bytes) override { inner_->consume(bytes); }
    bool ended() const override { return inner_->ended(); }
    int error_status() const override { return inner_->error_status(); }
    std::span<const Header> error_fields() const override { return inner_->error_fields(); }
    void release() override;

    void on_verdict(bool granted) override;

private:
    // Routes the exchange now that the verdict is known, keeping what it gives as inner_.
    void route();
    void detach();

    Router& router_;
    Exchange& exchange_;
    const AuthRule& rule_;
    std::string user_;
    std::shared_ptr<AuthCheck> check_; // until the verdict, or the client leaves
    std::optional<bool> verdict_;
    bool unknown_user_ = false; // the check's, for the error log
    std::unique_ptr<ResponseStream> inner_;
    bool body_ended_ = false;
};

} // namespace lepus
