#include "server/waiting_stream.h"

#include "http/complete_stream.h"

namespace lepus {

size_t WaitingStream::offer_body(std::span<const char> data) {
    return inner_ ? inner_->offer_body(data) : 0;
}

void WaitingStream::end_body() {
    body_ended_ = true;
    if (inner_) inner_->end_body();
}

StreamState WaitingStream::poll() {
    if (!inner_) {
        if (!wait_over()) return StreamState::Pending;
        route();
    }
    return inner_->poll();
}

void WaitingStream::route() {
    // The router answers into the exchange, where this stream sits (or the
    // stream that holds it, when a try_files target needed a check of its
    // own): step aside while it does, then take what it made as the inner
    // answer.
    std::unique_ptr<ResponseStream> current = std::move(exchange_.stream);
    exchange_.stream_fields.clear(); // the router adds the site's header rules again
    exchange_.response.reset();
    resume_router();
    if (exchange_.stream)
        inner_ = std::move(exchange_.stream);
    else
        inner_ = std::make_unique<CompleteStream>(exchange_.response, exchange_.request->is_head());
    exchange_.stream = std::move(current);
    if (body_ended_) inner_->end_body();
}

void WaitingStream::release() {
    cancel_wait();
    if (inner_) inner_->release();
}

} // namespace lepus
