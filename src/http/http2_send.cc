// Http2Engine's answers going out: each submitted stream's HEADERS (HPACK,
// in the order they were submitted, which is the order the client's decoder
// must see them), then DATA within the client's windows (RFC 9113 §6.9),
// scheduled by RFC 9218 priority: the most urgent streams first; of one
// urgency, a non-incremental stream is sent to its end (or its window) before
// the next, incremental ones take turns a frame at a time.
#include "base/time_cache.h"
#include "http/detail/http2_head.h"
#include "http/detail/http2_stream.h"
#include "http/http2_engine.h"
#include "log/error_log.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace lepus {

namespace {

// Values that change from response to response are not worth a place in the
// dynamic table (they would only push out the ones that repeat); secrets are
// marked never to be indexed (RFC 7541 §7.1.3). The date is the exception,
// indexed by send_head: it repeats for a whole second.
HpackIndexing indexing_for(std::string_view name) {
    using namespace std::string_view_literals;
    if (name == "date"sv || name == "content-length"sv || name == "etag"sv ||
        name == "last-modified"sv || name == "content-range"sv || name == "expires"sv ||
        name == "age"sv || name == "location"sv)
        return HpackIndexing::WithoutIndexing;
    if (name == "set-cookie"sv || name == "www-authenticate"sv) return HpackIndexing::NeverIndexed;
    return HpackIndexing::Incremental;
}

// The last response heads the thread's connections encoded: the fields
// lepus puts after :status and date (server, then the head's own), as HPACK
// bytes, and what they were made from. A head whose fields are the same and
// whose connection's encoder is in the same state (HpackEncoder::state_id)
// is the same bytes, copied instead of encoded again: a connection's answers
// mostly repeat their fields (content-type, accept-ranges, the server's),
// and the ones that change (the date, indexed once a second, and the
// content-length, never indexed) are encoded around the copy; a new date
// changes the table's state_id, so the cache misses once a second. Per thread,
// one entry for each of the last kEntries connections that answered, so an
// idle connection keeps none of it.
struct HeadBlockCache {
    static constexpr size_t kEntries = 16;
    struct Entry {
        uint64_t state_id = 0; // 0: empty
        int status = 0;
        std::string fields; // the head's fields as HTTP/1.1 lines
        std::string block;
    };
    std::array<Entry, kEntries> entries;
    size_t next = 0; // the entry replaced next

    // The entry that holds `head` encoded under `state_id`, or null. A head
    // edited in place (no fields_text) is never found, nor cached.
    const Entry* find(uint64_t state_id, const ResponseHead& head) const {
        std::string_view block, own;
        if (!head.fields_text(block, own)) return nullptr;
        for (const Entry& entry : entries)
            if (entry.state_id == state_id && entry.status == head.status &&
                entry.fields.size() == block.size() + own.size() &&
                std::string_view(entry.fields).substr(0, block.size()) == block &&
                std::string_view(entry.fields).substr(block.size()) == own)
                return &entry;
        return nullptr;
    }
    void store(uint64_t state_id, const ResponseHead& head, std::string_view encoded) {
        std::string_view block, own;
        if (!head.fields_text(block, own)) return;
        Entry& entry = entries[next];
        next = (next + 1) % kEntries;
        entry.state_id = state_id;
        entry.status = head.status;
        entry.fields.assign(block).append(own);
        entry.block.assign(encoded);
    }
};

thread_local HeadBlockCache head_cache;

// A DATA frame's header.
std::string_view data_header(char (&out)[kHttp2FrameHeaderSize], uint32_t length, bool end,
                             uint32_t stream_id) {
    http2_write_frame_header(out, length, Http2FrameType::Data, end ? http2_flag::kEndStream : 0,
                             stream_id);
    return {out, sizeof out};
}

} // namespace

bool Http2Engine::has_data(const Http2Stream& stream) {
    if (!stream.has_body || stream.end_stream_sent || stream.reset_queued || stream.closed ||
        stream.head_pending)
        return false;
    if (!stream.relaying) return true;
    const ResponseStream* backend = stream.exchange.stream.get();
    return backend && (!backend->body().empty() || backend->ended());
}

bool Http2Engine::window_open(const Http2Stream& stream) const {
    if (send_window_ > 0 && stream.send_window > 0) return true;
    // The end of a relayed body is an empty DATA frame, which no window holds back.
    return stream.relaying && stream.exchange.stream && stream.exchange.stream->body().empty() &&
           stream.exchange.stream->ended();
}

void Http2Engine::produce() {
    for (auto& stream : streams_)
        if (stream->head_pending && !stream->reset_queued && !stream->closed) send_head(*stream);
    // The streams that can send, most urgent first (a stable sort keeps the
    // order they opened in within an urgency).
    thread_local std::vector<Http2Stream*> ready;
    ready.clear();
    for (auto& stream : streams_)
        if (has_data(*stream) && window_open(*stream)) ready.push_back(stream.get());
    std::stable_sort(ready.begin(), ready.end(), [](const Http2Stream* a, const Http2Stream* b) {
        return a->urgency < b->urgency;
    });
    auto batch_full = [this] { return output_pending() >= kBatchBytes; };
    for (size_t group = 0; group < ready.size() && !batch_full();) {
        size_t end = group;
        while (end < ready.size() && ready[end]->urgency == ready[group]->urgency)
            ++end;
        for (size_t i = group; i < end && !batch_full(); ++i)
            if (!ready[i]->incremental)
                while (!batch_full() && send_data(*ready[i])) {
                }
        for (bool progress = true; progress && !batch_full();) {
            progress = false;
            for (size_t i = group; i < end && !batch_full(); ++i)
                if (ready[i]->incremental && send_data(*ready[i])) progress = true;
        }
        group = end;
    }
    sweep_streams();
}

void Http2Engine::send_head(Http2Stream& stream) {
    stream.head_pending = false;
    const ResponseHead& head = stream.exchange.response.head;
    // RFC 7541 Appendix A: the static indexes of the names lepus adds itself.
    constexpr uint8_t kDate = 33, kContentLength = 28;
    thread_local std::string block;
    block.clear();
    hpack_encoder_.begin_block(block);
    hpack_encoder_.encode_status(unsigned(head.status), block);
    // Indexed: every answer of the same second then names it by one byte
    // instead of 30 (h2load: 87 bytes a head -> 56); a new entry a second.
    hpack_encoder_.encode_known(kDate, "date", cached_http_date(context_.clock.now_s),
                                HpackIndexing::Incremental, block);
    uint64_t state = hpack_encoder_.state_id();
    if (const HeadBlockCache::Entry* cached = head_cache.find(state, head)) {
        block.append(cached->block);
    } else {
        size_t at = block.size();
        encode_head_fields(stream, block);
        // Cached when encoding it changed nothing (the first time, its fields
        // entered the table; from the next, the same fields are the same bytes).
        if (hpack_encoder_.state_id() == state)
            head_cache.store(state, head, std::string_view(block).substr(at));
    }
    if (head.content_length) {
        char digits[24];
        char* end = std::to_chars(digits, digits + sizeof digits, *head.content_length).ptr;
        hpack_encoder_.encode_known(kContentLength, "content-length",
                                    {digits, size_t(end - digits)}, HpackIndexing::WithoutIndexing,
                                    block);
    }
    http2_append_headers(output(), uint32_t(stream.id), block, !stream.has_body,
                         peer_max_frame_size_);
    if (block.capacity() > 16384) std::string().swap(block);
    if (!stream.has_body) sent_end_stream(stream);
}

void Http2Engine::encode_head_fields(Http2Stream& stream, std::string& block) {
    const ResponseHead& head = stream.exchange.response.head;
    thread_local std::vector<detail::HeadField> fields;
    detail::head_to_fields(head, context_.clock.now_s, stream.head_text, fields);
    // [0] :status and [1] date are written; then server, the head's fields,
    // and content-length last when there is one (detail::head_to_fields),
    // which send_head writes after.
    constexpr uint8_t kServer = 54;
    size_t end = fields.size() - (head.content_length ? 1 : 0);
    for (size_t i = 2; i < end; ++i) {
        std::string_view name = fields[i].name_view();
        std::string_view value = fields[i].value_view();
        if (i == 2)
            hpack_encoder_.encode_known(kServer, name, value, HpackIndexing::Incremental, block);
        else
            hpack_encoder_.encode(name, value, indexing_for(name), block);
    }
}

bool Http2Engine::send_data(Http2Stream& stream) {
    if (!has_data(stream) || !window_open(stream)) return false;
    auto window =
        std::min<int64_t>({send_window_, stream.send_window,
                           int64_t(std::min(peer_max_frame_size_, kHttp2DefaultMaxFrameSize))});
    window = std::max<int64_t>(window, 0);
    auto id = uint32_t(stream.id);
    char header[kHttp2FrameHeaderSize];
    Exchange& exchange = stream.exchange;
    uint64_t n = 0;
    bool end = false;
    if (stream.relaying) {
        ResponseStream& backend = *exchange.stream;
        std::span<const char> body = backend.body();
        n = std::min<uint64_t>(uint64_t(window), body.size());
        end = backend.ended() && n == body.size();
        output().append(data_header(header, uint32_t(n), end, id));
        output().append({body.data(), size_t(n)});
        backend.consume(size_t(n));
        stream.body_sent += n;
        if (end) {
            stream.accounted = true;
            context_.handler.account(exchange, stream.status, stream.body_sent);
        }
    } else {
        const Response& response = exchange.response;
        uint64_t at = stream.body_sent;
        n = std::min<uint64_t>(uint64_t(window), response.body_bytes() - at);
        if (at < response.body.size()) n = std::min<uint64_t>(n, response.body.size() - at);
        end = at + n >= response.body_bytes();
        std::string_view frame_header = data_header(header, uint32_t(n), end, id);
        if (at < response.body.size()) {
            send_memory_data(frame_header, response, response.body.substr(size_t(at), size_t(n)));
        } else if (int error = send_file_data(frame_header, response,
                                              response.file_offset + (at - response.body.size()),
                                              size_t(n));
                   error != 0) {
            // The file shrank or broke under us: the stream cannot complete.
            report_internal_error("pread for an HTTP/2 response", exchange.request->path, error);
            reset_stream(id, Http2Error::InternalError);
            return false;
        }
        stream.body_sent += n;
    }
    send_window_ -= int64_t(n);
    stream.send_window -= int64_t(n);
    if (end) sent_end_stream(stream);
    return !end && n > 0;
}

void Http2Engine::sent_end_stream(Http2Stream& stream) {
    stream.end_stream_sent = true;
    // §5.1: closed once both sides ended; until then half-closed (local),
    // and the client's body is still read (and dropped).
    if (stream.request_ended) close_stream(stream);
}

// A payload from memory. The contents of a cached file (a small static
// file) stay where they are, a segment of the output, on either transport
// (writev takes them as they are, TLS included); anything else (a
// generated page in owned_body) lives no longer than the Response, which
// may go before the frame is written, so it is copied now.
void Http2Engine::send_memory_data(std::string_view header, const Response& response,
                                   std::string_view payload) {
    // A small payload is cheaper copied than sent as a piece of its own:
    // pieces are what the batch is capped on (64 per writev), and h2c `/`
    // (612 bytes under h2load -m10) lost 4% per core as segments.
    constexpr size_t kCopyBelow = 2048;
    if (payload.size() >= kCopyBelow && response.file && response.file->holds(response.body)) {
        output().append_memory(header, response.file, payload.data(), payload.size());
        return;
    }
    output().append(header);
    output().append(payload);
}

// A payload from the file: read into the output now (pread), or, with
// --h2c-sendfile on a plain connection, left in the file for
// write_output's sendfile. A Response with a file_fd always has the FileRef
// that owns it (the static handler, error pages); without one the bytes are
// copied now, never left to an fd nobody keeps open. 0, or the errno value of
// a failed read.
int Http2Engine::send_file_data(std::string_view header, const Response& response, uint64_t file_at,
                                size_t length) {
    if (context_.options.h2c_sendfile && transport_.zero_copy_files() && response.file) {
        output().append_file(header, response.file, response.file_fd, file_at, length);
        return 0;
    }
    return output().append_file_copy(header, response.file_fd, file_at, length);
}

} // namespace lepus
