#include "http/compress_stream.h"

#include "base/ascii.h"

namespace lepus {

Coding stream_coding(const Request& request) {
    if (request.is_head()) return Coding::Identity; // no body: no coder run for nothing
    Negotiated chosen = negotiate_coding(request.accept_encoding, CodingSet{true, true, true});
    // A dynamic page is not refused for want of a coding (406 is for files,
    // whose representations are known): identity then.
    return chosen.acceptable ? chosen.coding : Coding::Identity;
}

namespace {

// Whether a comma-separated field value (Vary, Cache-Control) lists `token`.
bool lists_token(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        size_t comma = value.find(',');
        if (ascii_iequals(trim_ows(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

// Whether the body of `head` may be compressed at all: it has one (not 1xx,
// 204, 304), a type worth it, and is none of those left as they are: an
// encoded body; a part (its Content-Range counts the identity bytes, as static
// files never compress a range); a response whose sender forbids it (RFC 9111
// §5.2.2.6: an intermediary MUST NOT transform content under no-transform).
bool compressible(const StreamHead& head) {
    std::string_view content_type;
    bool untouchable = head.status == 206;
    for (const Header& header : head.headers) {
        if (ascii_iequals(header.name, "Content-Type")) content_type = header.value;
        if (ascii_iequals(header.name, "Content-Encoding") ||
            ascii_iequals(header.name, "Content-Range") ||
            (ascii_iequals(header.name, "Cache-Control") &&
             lists_token(header.value, "no-transform")))
            untouchable = true;
    }
    bool no_body = head.status < 200 || head.status == 204 || head.status == 304;
    return !no_body && !untouchable && is_compressible_type(content_type);
}

// Whether the head's Vary already names Accept-Encoding (or is "*").
bool varies_by_coding(const StreamHead& head) {
    for (const Header& header : head.headers)
        if (ascii_iequals(header.name, "Vary") &&
            (lists_token(header.value, "Accept-Encoding") || lists_token(header.value, "*")))
            return true;
    return false;
}

} // namespace

std::optional<bool> CompressingStream::worth_compressing() const {
    if (coding_ == Coding::Identity) return false;
    if (std::optional<uint64_t> length = inner_->head().content_length)
        return *length >= kMinCompressLength;
    // No Content-Length (a script's output is usually so): the length is known
    // once the body ends, or the body has grown past the minimum. Until then
    // the head waits, so that an empty redirect does not go out as a 20-byte
    // gzip stream (issue 31). The wait is short: php-fpm sends a page's output
    // in buffers of 4 KiB or at its end, and a page that flushes a few bytes
    // early (to start the browser on its CSS) waits for no more than 256.
    size_t held = inner_->body().size();
    if (held >= kMinCompressLength) return true;
    if (inner_->ended()) return false;
    return std::nullopt;
}

void CompressingStream::decide(const StreamHead& inner, bool may_compress, bool worth_it) {
    decided_ = true;
    head_ = inner;
    if (!may_compress) return; // untouched: head_ is the inner head
    headers_.clear();
    headers_.reserve(inner.headers.size() + 2); // one allocation: Vary, Content-Encoding
    for (const Header& header : inner.headers) {
        if (worth_it && ascii_iequals(header.name, "ETag") && !header.value.starts_with("W/")) {
            weak_etag_ = "W/" + std::string(header.value);
            headers_.push_back({header.name, weak_etag_});
            continue;
        }
        headers_.push_back(header);
    }
    if (!varies_by_coding(inner)) headers_.push_back({"Vary", "Accept-Encoding"});
    if (worth_it) {
        compressor_ = Compressor::make(coding_);
        headers_.push_back({"Content-Encoding", coding_name(coding_)});
        head_.content_length.reset();
    }
    head_.headers = headers_;
}

StreamState CompressingStream::poll() {
    StreamState state = inner_->poll();
    if (state != StreamState::Ready) return state;
    if (!decided_) {
        bool worth_it = false;
        bool may_compress = compressible(inner_->head()); // once: it reads every field
        if (may_compress) {
            std::optional<bool> known = worth_compressing();
            // Not yet: the inner stream calls the listener when more arrives.
            if (!known) return StreamState::Pending;
            worth_it = *known;
        }
        decide(inner_->head(), may_compress, worth_it);
    }
    if (compressor_ && !pump()) return StreamState::Broken;
    return StreamState::Ready;
}

bool CompressingStream::pump() {
    // Back-pressure: while the client has not taken what is compressed, the
    // inner stream keeps its bytes (and so stops reading its backend).
    if (out_.size() - out_pos_ >= kOutHighWater) return true;
    if (out_pos_ == out_.size()) {
        out_.clear();
        out_pos_ = 0;
    }
    std::span<const char> in = inner_->body();
    if (!in.empty()) {
        // Flush: everything the backend has given so far reaches the client
        // now, so a slow page shows progress burst by burst.
        if (!compressor_->write({in.data(), in.size()}, true, out_)) return false;
        inner_->consume(in.size());
    }
    if (inner_->ended() && inner_->body().empty() && !finished_) {
        if (!compressor_->finish(out_)) return false;
        finished_ = true;
    }
    return true;
}

std::span<const char> CompressingStream::body() const {
    if (!compressor_) return inner_->body();
    return {out_.data() + out_pos_, out_.size() - out_pos_};
}

void CompressingStream::consume(size_t bytes) {
    if (!compressor_) return inner_->consume(bytes);
    out_pos_ += bytes;
    // More room: take what the inner stream holds (it does not wake us for
    // bytes it already has).
    if (out_.size() - out_pos_ < kOutHighWater / 2) pump();
}

bool CompressingStream::ended() const {
    if (!compressor_) return inner_->ended();
    return finished_;
}

} // namespace lepus
