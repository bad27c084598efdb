// CompleteStream: a complete Response (a head, a memory body, a file range)
// presented as a ResponseStream, for a layer that had to answer with a
// stream before it knew the answer (a request waiting for its basic-auth
// verdict: server/auth_stream.h) and then got a static file, a redirect or
// an error page. The engine frames it like any stream: the head's fields
// are passed on as they are (no text to read again: Date, Server and
// Connection are the engine's, Content-Length a member), the memory body
// first, then the file read
// in chunks with pread (no sendfile: only the first request of a credential
// takes this path). A request body is read and dropped, as the engine does
// for a complete answer.
#pragma once

#include "http/exchange.h"

#include <string>
#include <vector>

namespace lepus {

class CompleteStream final : public ResponseStream {
public:
    // Takes over `response` (left empty); `head_only`: a HEAD request (no body is sent).
    CompleteStream(Response& response, bool head_only);

    size_t offer_body(std::span<const char> data) override { return data.size(); }
    void end_body() override {}
    StreamState poll() override { return failed_ ? StreamState::Broken : StreamState::Ready; }
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override;
    void consume(size_t bytes) override;
    bool ended() const override;
    int error_status() const override { return 500; }
    std::span<const Header> error_fields() const override { return {}; }
    void release() override {}

private:
    // Reads the next chunk of the file range once the bytes in hand are sent.
    void refill();

    Response response_;
    std::vector<Header> headers_; // views into response_.head
    StreamHead head_;
    std::string_view memory_; // what is left of the memory body
    std::string chunk_;       // the file bytes read and not yet consumed
    size_t chunk_sent_ = 0;
    uint64_t file_offset_ = 0, file_left_ = 0;
    bool failed_ = false; // pread failed: the response breaks off
};

} // namespace lepus
