// FastCGI 1.0 wire format: record encoders and an incremental record decoder.
//
// Everything here works on byte spans and caller-owned buffers, never on a
// socket, so the non-blocking client (phase 2) can drive it from a reactor and
// tests can feed it a stream split at any byte. Encoders append to a
// std::string the caller reuses, so steady state allocates nothing.
// Spec: "FastCGI Specification", Open Market, 1996 (sections cited as §).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lepus::fastcgi {

inline constexpr uint8_t kVersion = 1;                   // §8: FCGI_VERSION_1
inline constexpr size_t kHeaderSize = 8;                 // §3.3: FCGI_HEADER_LEN
inline constexpr size_t kMaxContentLength = 65535;       // contentLength is 16 bits
inline constexpr uint8_t kKeepConn = 1;                  // §5.1: FCGI_KEEP_CONN
inline constexpr std::array<char, 8> kPaddingBytes = {}; // zeros to writev after a record

// §8: record types. A decoded record may carry any other value (see is_known_type).
enum class RecordType : uint8_t {
    BeginRequest = 1,
    AbortRequest = 2,
    EndRequest = 3,
    Params = 4,
    Stdin = 5,
    Stdout = 6,
    Stderr = 7,
    Data = 8,
    GetValues = 9,
    GetValuesResult = 10,
    UnknownType = 11,
};

enum class Role : uint16_t { Responder = 1, Authorizer = 2, Filter = 3 };

// §5.5: FCGI_EndRequestBody.protocolStatus.
enum class ProtocolStatus : uint8_t {
    RequestComplete = 0,
    CantMultiplexConnection = 1,
    Overloaded = 2,
    UnknownRole = 3,
};

struct RecordHeader {
    uint8_t version = kVersion;
    RecordType type = RecordType::Params;
    uint16_t request_id = 0;
    uint16_t content_length = 0;
    uint8_t padding_length = 0;
};

struct BeginRequest {
    Role role = Role::Responder;
    bool keep_conn = false;
};

struct EndRequest {
    uint32_t app_status = 0;
    ProtocolStatus protocol_status = ProtocolStatus::RequestComplete;
};

// True for the eleven types §8 defines.
bool is_known_type(RecordType type);

// Padding that brings `content_length` to a multiple of 8 (§3.3 recommends it).
inline uint8_t padding_for(size_t content_length) {
    return (8 - content_length % 8) % 8;
}

// The 8 header bytes of one record.
std::array<char, kHeaderSize> encode_header(const RecordHeader& header);
// Reads a header from 8 bytes (no validation: the caller checks version and type).
RecordHeader decode_header(const char* bytes);

// --- encoders: each appends complete records to `out` ---------------------

// BEGIN_REQUEST (§5.1).
void append_begin_request(std::string& out, uint16_t request_id, Role role, bool keep_conn);
// ABORT_REQUEST (§5.4).
void append_abort_request(std::string& out, uint16_t request_id);
// END_REQUEST (§5.5).
void append_end_request(std::string& out, uint16_t request_id, const EndRequest& end);
// UNKNOWN_TYPE management record answering a record of type `unknown` (§4.2).
void append_unknown_type(std::string& out, uint8_t unknown);
// Stream records of `type` carrying `data`, split every 65535 bytes and padded to 8.
// Appends nothing for empty data: the stream's end is append_stream_end.
void append_stream(std::string& out, RecordType type, uint16_t request_id,
                   std::span<const char> data);
// The empty record that closes a stream (§3.3).
void append_stream_end(std::string& out, RecordType type, uint16_t request_id);
// One name-value pair in §3.4 encoding (no record header): for GET_VALUES(_RESULT) bodies.
void append_name_value(std::string& out, std::string_view name, std::string_view value);

// Header of one STDIN (or other stream) record whose content is `length` (<= 65535)
// bytes sent from elsewhere, e.g. writev({header, 8}, {body, length},
// {kPaddingBytes.data(), padding_for(length)}) without copying the body.
inline std::array<char, kHeaderSize> stream_record_header(RecordType type, uint16_t request_id,
                                                          uint16_t length) {
    return encode_header({kVersion, type, request_id, length, padding_for(length)});
}

// Writes a PARAMS stream (§5.2) straight into `out`: pairs are appended after a
// reserved header; finish() fills it in, pads, and appends the empty PARAMS
// record. Streams over 65535 bytes are re-split into several records in finish()
// through a scratch string the writer keeps (rare; reuse the writer to keep it).
class ParamsWriter {
public:
    ParamsWriter() = default;

    // Starts a PARAMS stream for `request_id` at the end of `out` (kept by reference).
    void begin(std::string& out, uint16_t request_id);
    // Appends one name-value pair.
    void add(std::string_view name, std::string_view value);
    // Appends the two lengths of a pair whose bytes the caller then appends with append_raw.
    void add_lengths(size_t name_length, size_t value_length);
    // Appends raw pair bytes (after add_lengths).
    void append_raw(std::string_view bytes) { out_->append(bytes); }
    // The buffer being written (to transform bytes in place after append_raw).
    std::string& buffer() { return *out_; }
    // Closes the stream: record headers, padding, terminator. Returns bytes of pair content.
    size_t finish();

private:
    std::string* out_ = nullptr;
    size_t start_ = 0;
    uint16_t request_id_ = 0;
    std::string scratch_;
};

// --- decoders --------------------------------------------------------------

// Parses a BEGIN_REQUEST body; nullopt unless it is 8 bytes.
std::optional<BeginRequest> parse_begin_request(std::span<const char> content);
// Parses an END_REQUEST body; nullopt unless it is 8 bytes.
std::optional<EndRequest> parse_end_request(std::span<const char> content);

// Iterates the name-value pairs of a complete PARAMS (or GET_VALUES) stream body.
class NameValueReader {
public:
    explicit NameValueReader(std::span<const char> content) : content_(content) {}
    // The next pair; false at the end or on a malformed pair (then error() is true).
    bool next(std::string_view& name, std::string_view& value);
    bool error() const { return error_; }

private:
    bool read_length(size_t& length);

    std::span<const char> content_;
    size_t offset_ = 0;
    bool error_ = false;
};

enum class DecodeStatus { Done, Again, Error };
enum class DecodeError { None, BadVersion };

struct Record {
    RecordType type = RecordType::Params;
    uint16_t request_id = 0;
    std::span<const char> content;
};

// Incremental record decoder, resumable at any byte offset. feed() consumes bytes
// of the stream and returns Done once a whole record, padding included, has been
// read. Its content is a view into `data` when content and padding all lay in
// that one call's `data`, otherwise into an internal buffer (a record split
// across calls is copied there); either way it is valid until the next feed()
// or reset(). Unknown types are delivered, not rejected (the peer answers them
// with UNKNOWN_TYPE, a client treats them as an error); a version other than 1
// is an Error and the decoder stays in error until reset().
class RecordDecoder {
public:
    // Consumes bytes of `data`; `consumed` is set to how many (<= data.size()).
    DecodeStatus feed(std::span<const char> data, size_t& consumed);
    // The record of the last Done.
    const Record& record() const { return record_; }
    DecodeError error() const { return error_; }
    // True between records (nothing partial buffered): safe to hand the connection on.
    bool at_record_boundary() const { return state_ == State::Header && header_fill_ == 0; }
    // Forgets all state (keeps buffer capacity): for a new connection or after an error.
    void reset();

private:
    enum class State { Header, Body, Failed };

    State state_ = State::Header;
    DecodeError error_ = DecodeError::None;
    std::array<char, kHeaderSize> header_bytes_{};
    size_t header_fill_ = 0;
    RecordHeader header_;
    size_t body_fill_ = 0; // content + padding bytes read so far
    std::string buffer_;   // content of a record split across feeds
    Record record_;
};

} // namespace lepus::fastcgi
