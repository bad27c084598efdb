// FastCGI record encoding and decoding (src/fastcgi/protocol.cc).
#include "fastcgi/protocol.h"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace lepus::fastcgi {
namespace {

struct OwnedRecord {
    RecordType type;
    uint16_t request_id;
    std::string content;
    bool operator==(const OwnedRecord&) const = default;
};

// Decodes `stream` fed in pieces of the given sizes (the last piece takes the rest).
std::vector<OwnedRecord> decode(std::string_view stream, std::vector<size_t> cuts = {},
                                RecordDecoder* reuse = nullptr) {
    RecordDecoder local;
    RecordDecoder& decoder = reuse ? *reuse : local;
    std::vector<OwnedRecord> records;
    size_t start = 0;
    cuts.push_back(stream.size());
    for (size_t cut : cuts) {
        std::span<const char> piece(stream.data() + start, cut - start);
        while (true) {
            size_t consumed = 0;
            DecodeStatus status = decoder.feed(piece, consumed);
            EXPECT_LE(consumed, piece.size());
            piece = piece.subspan(consumed);
            if (status == DecodeStatus::Error) {
                ADD_FAILURE() << "decode error";
                return records;
            }
            if (status == DecodeStatus::Again) {
                EXPECT_TRUE(piece.empty());
                break;
            }
            const Record& r = decoder.record();
            records.push_back(
                {r.type, r.request_id, std::string(r.content.begin(), r.content.end())});
        }
        start = cut;
    }
    EXPECT_TRUE(decoder.at_record_boundary());
    return records;
}

std::string stream_content(const std::vector<OwnedRecord>& records, RecordType type) {
    std::string out;
    for (const auto& r : records)
        if (r.type == type) out += r.content;
    return out;
}

TEST(FastcgiProtocol, HeaderRoundTrips) {
    RecordHeader header{1, RecordType::Stdout, 0xbeef, 0x1234, 7};
    auto bytes = encode_header(header);
    RecordHeader back = decode_header(bytes.data());
    EXPECT_EQ(back.version, 1);
    EXPECT_EQ(back.type, RecordType::Stdout);
    EXPECT_EQ(back.request_id, 0xbeef);
    EXPECT_EQ(back.content_length, 0x1234);
    EXPECT_EQ(back.padding_length, 7);
}

TEST(FastcgiProtocol, EveryRecordTypeRoundTrips) {
    std::string out;
    append_begin_request(out, 7, Role::Responder, true);
    ParamsWriter params;
    params.begin(out, 7);
    params.add("SCRIPT_FILENAME", "/srv/index.php");
    params.add("EMPTY", "");
    params.finish();
    append_stream(out, RecordType::Stdin, 7, std::string_view("body"));
    append_stream_end(out, RecordType::Stdin, 7);
    append_stream(out, RecordType::Stdout, 7, std::string_view("Status: 200\r\n\r\nhi"));
    append_stream_end(out, RecordType::Stdout, 7);
    append_stream(out, RecordType::Stderr, 7, std::string_view("warning"));
    append_stream(out, RecordType::Data, 7, std::string_view("data"));
    append_end_request(out, 7, {0x01020304, ProtocolStatus::Overloaded});
    append_abort_request(out, 7);
    std::string names;
    append_name_value(names, "FCGI_MAX_CONNS", "");
    append_stream(out, RecordType::GetValues, 0, names);
    std::string values;
    append_name_value(values, "FCGI_MAX_CONNS", "10");
    append_stream(out, RecordType::GetValuesResult, 0, values);
    append_unknown_type(out, 42);
    ASSERT_EQ(out.size() % 8, 0u) << "every record is padded to 8";

    auto records = decode(out);
    ASSERT_EQ(records.size(), 14u);
    EXPECT_EQ(records[0].type, RecordType::BeginRequest);
    auto begin = parse_begin_request(records[0].content);
    ASSERT_TRUE(begin);
    EXPECT_EQ(begin->role, Role::Responder);
    EXPECT_TRUE(begin->keep_conn);
    EXPECT_EQ(records[1].type, RecordType::Params);
    EXPECT_EQ(records[2], (OwnedRecord{RecordType::Params, 7, ""}));
    NameValueReader reader{std::span<const char>(records[1].content)};
    std::string_view name, value;
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(name, "SCRIPT_FILENAME");
    EXPECT_EQ(value, "/srv/index.php");
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(name, "EMPTY");
    EXPECT_EQ(value, "");
    EXPECT_FALSE(reader.next(name, value));
    EXPECT_FALSE(reader.error());
    EXPECT_EQ(records[3], (OwnedRecord{RecordType::Stdin, 7, "body"}));
    EXPECT_EQ(records[4], (OwnedRecord{RecordType::Stdin, 7, ""}));
    EXPECT_EQ(records[5], (OwnedRecord{RecordType::Stdout, 7, "Status: 200\r\n\r\nhi"}));
    EXPECT_EQ(records[6], (OwnedRecord{RecordType::Stdout, 7, ""}));
    EXPECT_EQ(records[7], (OwnedRecord{RecordType::Stderr, 7, "warning"}));
    EXPECT_EQ(records[8], (OwnedRecord{RecordType::Data, 7, "data"}));
    EXPECT_EQ(records[9].type, RecordType::EndRequest);
    auto end = parse_end_request(records[9].content);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->app_status, 0x01020304u);
    EXPECT_EQ(end->protocol_status, ProtocolStatus::Overloaded);
    EXPECT_EQ(records[10], (OwnedRecord{RecordType::AbortRequest, 7, ""}));
    EXPECT_EQ(records[11], (OwnedRecord{RecordType::GetValues, 0, names}));
    EXPECT_EQ(records[12], (OwnedRecord{RecordType::GetValuesResult, 0, values}));
    EXPECT_EQ(records[13].type, RecordType::UnknownType);
    EXPECT_EQ(records[13].content[0], 42);
    EXPECT_TRUE(std::all_of(records.begin(), records.end(),
                            [](const OwnedRecord& r) { return is_known_type(r.type); }));
}

std::string sample_stream() {
    std::string out;
    append_begin_request(out, 1, Role::Responder, false);
    ParamsWriter params;
    params.begin(out, 1);
    params.add("QUERY_STRING", "a=1");
    params.add(std::string(200, 'N'), std::string(300, 'v'));
    params.finish();
    append_stream(out, RecordType::Stdout, 1, std::string(1001, 'x')); // padding 7
    append_stream(out, RecordType::Stdout, 1, std::string_view("abc"));
    append_stream_end(out, RecordType::Stdout, 1);
    append_end_request(out, 1, {3, ProtocolStatus::RequestComplete});
    return out;
}

TEST(FastcgiProtocol, SplitAtEveryOffsetGivesTheSameRecords) {
    std::string stream = sample_stream();
    auto whole = decode(stream);
    ASSERT_EQ(whole.size(), 7u);
    for (size_t cut = 0; cut <= stream.size(); ++cut)
        ASSERT_EQ(decode(stream, {cut}), whole) << "cut at " << cut;
    for (size_t cut = 1; cut + 5 <= stream.size(); cut += 13)
        ASSERT_EQ(decode(stream, {cut, cut + 1, cut + 5}), whole) << "cuts at " << cut;
}

TEST(FastcgiProtocol, ByteAtATime) {
    std::string stream = sample_stream();
    std::vector<size_t> cuts;
    for (size_t i = 1; i < stream.size(); ++i)
        cuts.push_back(i);
    EXPECT_EQ(decode(stream, cuts), decode(stream));
}

TEST(FastcgiProtocol, ContentPointsIntoInputWhenWhole) {
    std::string out;
    append_stream(out, RecordType::Stdout, 1, std::string_view("hello"));
    RecordDecoder decoder;
    size_t consumed = 0;
    ASSERT_EQ(decoder.feed(out, consumed), DecodeStatus::Done);
    EXPECT_EQ(consumed, out.size());
    EXPECT_EQ(decoder.record().content.data(), out.data() + kHeaderSize);
}

TEST(FastcgiProtocol, FourByteLengths) {
    std::string out;
    std::string long_name(128, 'n'), long_value(70000, 'v');
    append_name_value(out, long_name, "x");
    append_name_value(out, "y", long_value);
    ASSERT_EQ(out.size(), 4 + 1 + 128 + 1 + 1 + 4 + 1 + 70000u);
    EXPECT_EQ(static_cast<uint8_t>(out[0]), 0x80); // 128 in four bytes, top bit set
    EXPECT_EQ(static_cast<uint8_t>(out[3]), 128);
    NameValueReader reader{std::span<const char>(out)};
    std::string_view name, value;
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(name, long_name);
    EXPECT_EQ(value, "x");
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(name, "y");
    EXPECT_EQ(value, long_value);
    EXPECT_FALSE(reader.next(name, value));
    EXPECT_FALSE(reader.error());
}

TEST(FastcgiProtocol, TruncatedPairIsAnError) {
    std::string out;
    append_name_value(out, "NAME", "value");
    out.pop_back();
    NameValueReader reader{std::span<const char>(out)};
    std::string_view name, value;
    EXPECT_FALSE(reader.next(name, value));
    EXPECT_TRUE(reader.error());
}

TEST(FastcgiProtocol, LargeParamsSplitIntoRecords) {
    std::string out = "prefix";
    ParamsWriter params;
    params.begin(out, 9);
    params.add("SHORT", "1");
    params.add("HTTP_COOKIE", std::string(70000, 'c'));
    params.add("LAST", "2");
    size_t length = params.finish();
    ASSERT_EQ(out.substr(0, 6), "prefix");
    auto records = decode(std::string_view(out).substr(6));
    ASSERT_GE(records.size(), 3u);
    size_t non_empty = 0;
    for (const auto& r : records) {
        EXPECT_EQ(r.type, RecordType::Params);
        EXPECT_EQ(r.request_id, 9);
        EXPECT_LE(r.content.size(), kMaxContentLength);
        non_empty += !r.content.empty();
    }
    EXPECT_EQ(non_empty, 2u);
    EXPECT_TRUE(records.back().content.empty()) << "terminated by an empty PARAMS record";
    std::string content = stream_content(records, RecordType::Params);
    EXPECT_EQ(content.size(), length);
    NameValueReader reader{std::span<const char>(content)};
    std::string_view name, value;
    ASSERT_TRUE(reader.next(name, value));
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(value.size(), 70000u);
    ASSERT_TRUE(reader.next(name, value));
    EXPECT_EQ(name, "LAST");
}

TEST(FastcgiProtocol, EmptyParamsIsJustTheTerminator) {
    std::string out;
    ParamsWriter params;
    params.begin(out, 4);
    EXPECT_EQ(params.finish(), 0u);
    auto records = decode(out);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0], (OwnedRecord{RecordType::Params, 4, ""}));
}

TEST(FastcgiProtocol, StdinSplitAt65535AndPadded) {
    std::string body(65535 * 2 + 10, 'b');
    std::string out;
    append_stream(out, RecordType::Stdin, 1, body);
    append_stream_end(out, RecordType::Stdin, 1);
    auto records = decode(out);
    ASSERT_EQ(records.size(), 4u);
    EXPECT_EQ(records[0].content.size(), 65535u);
    EXPECT_EQ(records[2].content.size(), 10u);
    EXPECT_EQ(stream_content(records, RecordType::Stdin), body);
    // 65535 content + 1 padding, twice; 10 + 6; then the terminator.
    EXPECT_EQ(out.size(), 2 * (8 + 65536) + (8 + 16) + 8u);
}

TEST(FastcgiProtocol, StreamRecordHeaderForWritev) {
    auto header = stream_record_header(RecordType::Stdin, 3, 13);
    RecordHeader back = decode_header(header.data());
    EXPECT_EQ(back.type, RecordType::Stdin);
    EXPECT_EQ(back.content_length, 13);
    EXPECT_EQ(back.padding_length, 3);
    std::string wire(header.data(), 8);
    wire += "thirteen byte";
    wire.append(kPaddingBytes.data(), padding_for(13));
    auto records = decode(wire);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].content, "thirteen byte");
}

TEST(FastcgiProtocol, ForeignPaddingIsSkipped) {
    // Padding lengths need not bring records to 8 (§3.3 only recommends it).
    std::string wire;
    auto header = encode_header({1, RecordType::Stdout, 1, 3, 200});
    wire.append(header.data(), 8);
    wire += "abc";
    wire.append(200, '\xff');
    append_end_request(wire, 1, {});
    for (size_t cut = 0; cut <= wire.size(); ++cut) {
        auto records = decode(wire, {cut});
        ASSERT_EQ(records.size(), 2u);
        EXPECT_EQ(records[0].content, "abc");
        EXPECT_EQ(records[1].type, RecordType::EndRequest);
    }
}

TEST(FastcgiProtocol, GarbageHeaderIsAnError) {
    std::string wire = "HTTP/1.1 200 OK\r\n\r\n";
    RecordDecoder decoder;
    size_t consumed = 0;
    EXPECT_EQ(decoder.feed(wire, consumed), DecodeStatus::Error);
    EXPECT_EQ(decoder.error(), DecodeError::BadVersion);
    EXPECT_EQ(decoder.feed(wire, consumed), DecodeStatus::Error) << "stays failed";
    EXPECT_EQ(consumed, 0u);
    decoder.reset();
    EXPECT_EQ(decoder.error(), DecodeError::None);
    std::string good;
    append_stream(good, RecordType::Stdout, 1, std::string_view("ok"));
    EXPECT_EQ(decoder.feed(good, consumed), DecodeStatus::Done);
}

TEST(FastcgiProtocol, VersionNineSplitIsAnError) {
    auto header = encode_header({9, RecordType::Stdout, 1, 0, 0});
    RecordDecoder decoder;
    size_t consumed = 0;
    EXPECT_EQ(decoder.feed(std::span<const char>(header.data(), 3), consumed), DecodeStatus::Again);
    EXPECT_EQ(decoder.feed(std::span<const char>(header.data() + 3, 5), consumed),
              DecodeStatus::Error);
}

TEST(FastcgiProtocol, UnknownTypeIsDelivered) {
    std::string wire;
    auto header = encode_header({1, static_cast<RecordType>(200), 0, 0, 0});
    wire.append(header.data(), 8);
    auto records = decode(wire);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_FALSE(is_known_type(records[0].type));
}

TEST(FastcgiProtocol, ResetBetweenRequestsOnOneDecoder) {
    // reyk/httpd#49: state left over from one keep-alive request must not leak.
    std::string stream = sample_stream();
    RecordDecoder decoder;
    auto first = decode(stream, {100}, &decoder);
    decoder.reset();
    EXPECT_EQ(decode(stream, {37}, &decoder), first);
    // A reset in the middle of a record (the connection was dropped) starts clean.
    std::span<const char> piece(stream.data(), 20);
    size_t consumed = 0;
    while (decoder.feed(piece, consumed) == DecodeStatus::Done)
        piece = piece.subspan(consumed);
    EXPECT_FALSE(decoder.at_record_boundary());
    decoder.reset();
    EXPECT_EQ(decode(stream, {}, &decoder), first);
}

TEST(FastcgiProtocol, MalformedBodiesAreRejected) {
    EXPECT_FALSE(parse_end_request(std::string_view("short")));
    EXPECT_FALSE(parse_begin_request(std::string_view("")));
}

} // namespace
} // namespace lepus::fastcgi
