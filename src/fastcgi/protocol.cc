// FastCGI record encoding and decoding. See protocol.h; § refers to the FastCGI 1.0 spec.
#include "fastcgi/protocol.h"

#include <algorithm>
#include <cstring>

namespace lepus::fastcgi {

bool is_known_type(RecordType type) {
    auto value = static_cast<uint8_t>(type);
    return value >= 1 && value <= 11;
}

std::array<char, kHeaderSize> encode_header(const RecordHeader& header) {
    return {static_cast<char>(header.version),
            static_cast<char>(header.type),
            static_cast<char>(header.request_id >> 8),
            static_cast<char>(header.request_id & 0xff),
            static_cast<char>(header.content_length >> 8),
            static_cast<char>(header.content_length & 0xff),
            static_cast<char>(header.padding_length),
            0};
}

RecordHeader decode_header(const char* bytes) {
    auto byte = [bytes](int i) { return static_cast<uint8_t>(bytes[i]); };
    RecordHeader header;
    header.version = byte(0);
    header.type = static_cast<RecordType>(byte(1));
    header.request_id = static_cast<uint16_t>(byte(2) << 8 | byte(3));
    header.content_length = static_cast<uint16_t>(byte(4) << 8 | byte(5));
    header.padding_length = byte(6);
    return header;
}

namespace {

void append_header(std::string& out, RecordType type, uint16_t request_id, size_t length) {
    auto header = encode_header(
        {kVersion, type, request_id, static_cast<uint16_t>(length), padding_for(length)});
    out.append(header.data(), header.size());
}

void append_length(std::string& out, size_t length) {
    // §3.4: one byte below 128, else four bytes big-endian with the top bit set.
    if (length < 128) {
        out.push_back(static_cast<char>(length));
        return;
    }
    char bytes[4] = {static_cast<char>((length >> 24 & 0x7f) | 0x80),
                     static_cast<char>(length >> 16 & 0xff), static_cast<char>(length >> 8 & 0xff),
                     static_cast<char>(length & 0xff)};
    out.append(bytes, 4);
}

} // namespace

void append_begin_request(std::string& out, uint16_t request_id, Role role, bool keep_conn) {
    append_header(out, RecordType::BeginRequest, request_id, 8);
    auto role_value = static_cast<uint16_t>(role);
    char body[8] = {static_cast<char>(role_value >> 8), static_cast<char>(role_value & 0xff),
                    static_cast<char>(keep_conn ? kKeepConn : 0)};
    out.append(body, 8);
}

void append_abort_request(std::string& out, uint16_t request_id) {
    append_header(out, RecordType::AbortRequest, request_id, 0);
}

void append_end_request(std::string& out, uint16_t request_id, const EndRequest& end) {
    append_header(out, RecordType::EndRequest, request_id, 8);
    char body[8] = {
        static_cast<char>(end.app_status >> 24), static_cast<char>(end.app_status >> 16 & 0xff),
        static_cast<char>(end.app_status >> 8 & 0xff), static_cast<char>(end.app_status & 0xff),
        static_cast<char>(end.protocol_status)};
    out.append(body, 8);
}

void append_unknown_type(std::string& out, uint8_t unknown) {
    // §4.2: management records carry request id 0.
    append_header(out, RecordType::UnknownType, 0, 8);
    char body[8] = {static_cast<char>(unknown)};
    out.append(body, 8);
}

void append_stream(std::string& out, RecordType type, uint16_t request_id,
                   std::span<const char> data) {
    while (!data.empty()) {
        size_t length = std::min(data.size(), kMaxContentLength);
        append_header(out, type, request_id, length);
        out.append(data.data(), length);
        out.append(kPaddingBytes.data(), padding_for(length));
        data = data.subspan(length);
    }
}

void append_stream_end(std::string& out, RecordType type, uint16_t request_id) {
    append_header(out, type, request_id, 0);
}

void append_name_value(std::string& out, std::string_view name, std::string_view value) {
    append_length(out, name.size());
    append_length(out, value.size());
    out.append(name);
    out.append(value);
}

// --- ParamsWriter ------------------------------------------------------------

void ParamsWriter::begin(std::string& out, uint16_t request_id) {
    out_ = &out;
    request_id_ = request_id;
    start_ = out.size();
    out.append(kHeaderSize, '\0'); // filled in by finish()
}

void ParamsWriter::add(std::string_view name, std::string_view value) {
    append_name_value(*out_, name, value);
}

void ParamsWriter::add_lengths(size_t name_length, size_t value_length) {
    append_length(*out_, name_length);
    append_length(*out_, value_length);
}

size_t ParamsWriter::finish() {
    std::string& out = *out_;
    size_t length = out.size() - start_ - kHeaderSize;
    if (length == 0) {
        out.resize(start_);
    } else if (length <= kMaxContentLength) {
        auto header = encode_header({kVersion, RecordType::Params, request_id_,
                                     static_cast<uint16_t>(length), padding_for(length)});
        std::memcpy(out.data() + start_, header.data(), header.size());
        out.append(kPaddingBytes.data(), padding_for(length));
    } else {
        // Rare: a pair stream over 64 KiB. §3.3 lets a stream's bytes, pairs
        // included, break anywhere between records, so re-frame the bytes.
        scratch_.assign(out, start_ + kHeaderSize, length);
        out.resize(start_);
        append_stream(out, RecordType::Params, request_id_, scratch_);
    }
    append_stream_end(out, RecordType::Params, request_id_);
    return length;
}

// --- decoders ----------------------------------------------------------------

std::optional<BeginRequest> parse_begin_request(std::span<const char> content) {
    if (content.size() != 8) return std::nullopt;
    auto byte = [&](int i) { return static_cast<uint8_t>(content[i]); };
    return BeginRequest{static_cast<Role>(byte(0) << 8 | byte(1)), (byte(2) & kKeepConn) != 0};
}

std::optional<EndRequest> parse_end_request(std::span<const char> content) {
    if (content.size() != 8) return std::nullopt;
    auto byte = [&](int i) { return static_cast<uint32_t>(static_cast<uint8_t>(content[i])); };
    return EndRequest{byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3),
                      static_cast<ProtocolStatus>(byte(4))};
}

bool NameValueReader::read_length(size_t& length) {
    if (offset_ >= content_.size()) return false;
    auto first = static_cast<uint8_t>(content_[offset_]);
    if (first < 128) {
        length = first;
        offset_ += 1;
        return true;
    }
    if (content_.size() - offset_ < 4) return false;
    auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<uint8_t>(content_[i])); };
    length =
        (first & 0x7f) << 24 | byte(offset_ + 1) << 16 | byte(offset_ + 2) << 8 | byte(offset_ + 3);
    offset_ += 4;
    return true;
}

bool NameValueReader::next(std::string_view& name, std::string_view& value) {
    if (error_ || offset_ == content_.size()) return false;
    size_t name_length = 0, value_length = 0;
    if (!read_length(name_length) || !read_length(value_length) ||
        content_.size() - offset_ < name_length ||
        content_.size() - offset_ - name_length < value_length) {
        error_ = true;
        return false;
    }
    name = {content_.data() + offset_, name_length};
    value = {content_.data() + offset_ + name_length, value_length};
    offset_ += name_length + value_length;
    return true;
}

// --- RecordDecoder -------------------------------------------------------------

DecodeStatus RecordDecoder::feed(std::span<const char> data, size_t& consumed) {
    consumed = 0;
    if (state_ == State::Failed) return DecodeStatus::Error;
    size_t pos = 0;
    if (state_ == State::Header) {
        if (header_fill_ == 0 && data.size() >= kHeaderSize) {
            header_ = decode_header(data.data());
            pos = kHeaderSize;
        } else {
            size_t take = std::min(kHeaderSize - header_fill_, data.size());
            std::memcpy(header_bytes_.data() + header_fill_, data.data(), take);
            header_fill_ += take;
            pos = take;
            if (header_fill_ < kHeaderSize) {
                consumed = pos;
                return DecodeStatus::Again;
            }
            header_ = decode_header(header_bytes_.data());
        }
        header_fill_ = 0;
        if (header_.version != kVersion) {
            // Nothing after a bad header can be framed: the connection is lost.
            state_ = State::Failed;
            error_ = DecodeError::BadVersion;
            consumed = pos;
            return DecodeStatus::Error;
        }
        size_t total = size_t{header_.content_length} + header_.padding_length;
        if (data.size() - pos >= total) {
            // Common case: the whole body is in this call's data, no copy.
            record_ = {header_.type, header_.request_id, data.subspan(pos, header_.content_length)};
            consumed = pos + total;
            return DecodeStatus::Done;
        }
        state_ = State::Body;
        body_fill_ = 0;
        buffer_.clear();
    }
    // State::Body: the record is split across calls, gather its content.
    size_t total = size_t{header_.content_length} + header_.padding_length;
    size_t take = std::min(total - body_fill_, data.size() - pos);
    if (body_fill_ < header_.content_length) {
        size_t content_take = std::min(take, header_.content_length - body_fill_);
        buffer_.append(data.data() + pos, content_take);
    }
    body_fill_ += take;
    pos += take;
    consumed = pos;
    if (body_fill_ < total) return DecodeStatus::Again;
    state_ = State::Header;
    record_ = {header_.type, header_.request_id,
               std::span<const char>(buffer_.data(), header_.content_length)};
    return DecodeStatus::Done;
}

void RecordDecoder::reset() {
    state_ = State::Header;
    error_ = DecodeError::None;
    header_fill_ = 0;
    body_fill_ = 0;
    buffer_.clear();
    record_ = {};
}

} // namespace lepus::fastcgi
