#include "server/worker.h"

namespace lepus {
namespace {
// Enough for every connection that is mid-request at once on a busy reactor;
// beyond it states are freed rather than hoarded.
constexpr size_t kMaxPooledStates = 1024;
} // namespace

std::unique_ptr<RequestState> Worker::acquire_state() {
    if (free_states_.empty()) return std::make_unique<RequestState>();
    auto state = std::move(free_states_.back());
    free_states_.pop_back();
    return state;
}

void Worker::release_state(std::unique_ptr<RequestState> state) {
    state->parser.reset();
    state->response.reset();
    state->input_begin = state->input_end = 0;
    // A large POST or response must not stay pinned in the pool.
    if (state->fastcgi_body.capacity() > 64 * 1024) std::string().swap(state->fastcgi_body);
    if (state->proxy_out.capacity() > 128 * 1024) std::string().swap(state->proxy_out);
    state->proxy_out.clear();
    state->proxy_sent = 0;
    if (free_states_.size() < kMaxPooledStates) free_states_.push_back(std::move(state));
}

} // namespace lepus
