// CompressingStream: a ResponseStream around another (a PHP page from
// FastCGI, an HTTP backend's answer) that compresses its body as it streams, in
// the coding negotiated for the request. Engine-independent: it sits between
// the router's stream and whichever protocol engine drives it.
//
// Once the inner head is known it decides: a response that already has a
// Content-Encoding, is a part (206, Content-Range), says Cache-Control:
// no-transform, has no body (204, 304, 1xx), is not of a compressible type or
// is known to be shorter than kMinCompressLength passes through untouched
// (with Vary: Accept-Encoding when its type is compressible and it has no such
// Vary already). Without a
// Content-Length, the head waits until the body has kMinCompressLength bytes
// or has ended: an empty redirect or a short fragment goes out as it is
// (nginx compresses those: its gzip_min_length only reads Content-Length).
// Otherwise the
// body is compressed with a flush each time the inner stream has nothing more
// buffered, so a page that prints slowly shows each burst as it comes, and
// Content-Length is dropped (the engine then frames the body itself); a strong
// ETag becomes weak (RFC 9110 §8.8.1).
#pragma once

#include "http/compress.h"
#include "http/exchange.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lepus {

class CompressingStream final : public ResponseStream {
public:
    // `coding` Identity: only Vary is added to compressible responses.
    CompressingStream(std::unique_ptr<ResponseStream> inner, Coding coding)
        : inner_(std::move(inner)), coding_(coding) {}

    size_t offer_body(std::span<const char> data) override { return inner_->offer_body(data); }
    void end_body() override { inner_->end_body(); }
    StreamState poll() override;
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override;
    void consume(size_t bytes) override;
    bool ended() const override;
    int error_status() const override { return inner_->error_status(); }
    std::span<const Header> error_fields() const override { return inner_->error_fields(); }
    void release() override { inner_->release(); }

    // Compressed bytes held for the client before the inner stream is read on.
    static constexpr size_t kOutHighWater = size_t{64} * 1024;

private:
    // Whether the body is long enough to compress; nullopt while that is not
    // known yet (no Content-Length, fewer bytes than the minimum so far).
    std::optional<bool> worth_compressing() const;
    // `may_compress`: compressible(inner_head), already asked.
    void decide(const StreamHead& inner_head, bool may_compress, bool worth_it);
    bool pump(); // false: the coder failed

    std::unique_ptr<ResponseStream> inner_;
    Coding coding_;
    std::unique_ptr<Compressor> compressor_; // null: passing through
    bool decided_ = false;
    bool finished_ = false; // the coder's trailer is in out_
    StreamHead head_;
    std::vector<Header> headers_;
    std::string weak_etag_;
    std::string out_;
    size_t out_pos_ = 0;
};

// The coding a streamed response to `request` gets under `compress` (Identity:
// none, and then CompressingStream only adds Vary).
Coding stream_coding(const Request& request);

} // namespace lepus
