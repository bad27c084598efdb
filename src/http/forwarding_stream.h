// ForwardingStream: a ResponseStream that stands in front of another one, made
// later, and hands the response side over to it once it exists (the request
// body side and poll() stay the subclass's). BufferedBodyStream makes its
// inner stream at the end of the body, WaitingStream (src/server) when its
// wait is over; until then they answer Pending, so the engines never ask for
// a head or body before inner_ is set.
#pragma once

#include "http/exchange.h"

#include <memory>

namespace lepus {

class ForwardingStream : public ResponseStream {
public:
    const StreamHead& head() const override { return inner_->head(); }
    std::span<const char> body() const override { return inner_->body(); }
    void consume(size_t bytes) override { inner_->consume(bytes); }
    bool ended() const override { return inner_->ended(); }
    // Broken before there is an inner stream (a failed body buffer): a 500.
    int error_status() const override { return inner_ ? inner_->error_status() : 500; }
    std::span<const Header> error_fields() const override {
        return inner_ ? inner_->error_fields() : std::span<const Header>();
    }

protected:
    std::unique_ptr<ResponseStream> inner_; // null until the subclass makes it
};

} // namespace lepus
