// Worker: what one reactor thread owns besides its Reactor: the static file
// handler, the pool of per-request state, the access log scratch space.
// Everything here is touched by that thread only.
#pragma once

#include "http/chunked_decoder.h"
#include "http/request_parser.h"
#include "http/response.h"
#include "http/static_handler.h"
#include "log/async_logger.h"
#include "net/reactor.h"
#include "server/options.h"

#include <memory>
#include <string>
#include <vector>

namespace lepus {

// The state a connection needs only while a request is in flight. Idle
// keepalive connections hold none, which keeps them a few hundred bytes.
struct RequestState {
    RequestParser parser;
    Response response;
    std::string input; // bytes received; [input_begin, input_end) not yet consumed
    size_t input_begin = 0;
    size_t input_end = 0;
    ChunkedDecoder chunked; // discards a chunked body the handler does not read
    std::string scratch;
};

class Worker {
public:
    Worker(const ServerOptions& options, AsyncLogger& access_log)
        : options_(options), access_log_(access_log) {}

    // Pooled request state: reused, so the keepalive path does not allocate.
    std::unique_ptr<RequestState> acquire_state();
    void release_state(std::unique_ptr<RequestState> state);

    const ServerOptions& options() const { return options_; }
    AsyncLogger& access_log() { return access_log_; }
    std::string& log_line() { return log_line_; }
    StaticHandler& static_files() { return *static_files_; }
    void set_static_files(std::unique_ptr<StaticHandler> handler) {
        static_files_ = std::move(handler);
    }
    Reactor* reactor = nullptr;

private:
    const ServerOptions& options_;
    AsyncLogger& access_log_;
    std::unique_ptr<StaticHandler> static_files_;
    std::vector<std::unique_ptr<RequestState>> free_states_;
    std::string log_line_;
};

} // namespace lepus
