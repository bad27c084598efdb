// HPACK (src/http/hpack.h): RFC 7541 Appendix C's examples, decoded and
// encoded, the dynamic table's size updates and eviction, and every way a
// block can be wrong. test/http/hpack_differential_test.cc compares the decoder
// with nghttp2's on many more blocks.
#include "http/detail/hpack_huffman.h"
#include "http/hpack.h"

#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

namespace lepus {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

std::vector<uint8_t> hex(std::string_view text) {
    std::vector<uint8_t> bytes;
    int high = -1;
    for (char c : text) {
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0) continue;
        if (high < 0) {
            high = digit;
        } else {
            bytes.push_back(static_cast<uint8_t>(high * 16 + digit));
            high = -1;
        }
    }
    return bytes;
}

std::vector<uint8_t> bytes_of(const std::string& text) {
    return {text.begin(), text.end()};
}

Fields fields_of(const HpackHeaderList& list) {
    Fields fields;
    for (size_t i = 0; i < list.size(); ++i)
        fields.emplace_back(std::string(list[i].name), std::string(list[i].value));
    return fields;
}

HpackStatus decode(HpackDecoder& decoder, std::string_view block_hex, Fields* fields = nullptr) {
    HpackHeaderList list;
    std::vector<uint8_t> block = hex(block_hex);
    HpackStatus status = decoder.decode(block, list);
    if (fields) *fields = fields_of(list);
    return status;
}

void expect_decodes(HpackDecoder& decoder, std::string_view block_hex, const Fields& expected,
                    size_t table_size) {
    Fields fields;
    ASSERT_EQ(decode(decoder, block_hex, &fields), HpackStatus::Ok) << block_hex;
    EXPECT_EQ(fields, expected);
    EXPECT_EQ(decoder.table().size(), table_size);
}

// --- Appendix C.2: one representation each ---

TEST(HpackDecoder, LiteralWithIndexingC21) {
    HpackDecoder decoder;
    expect_decodes(decoder, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                   {{"custom-key", "custom-header"}}, 55);
}

TEST(HpackDecoder, LiteralWithoutIndexingC22) {
    HpackDecoder decoder;
    expect_decodes(decoder, "040c 2f73 616d 706c 652f 7061 7468", {{":path", "/sample/path"}}, 0);
}

TEST(HpackDecoder, LiteralNeverIndexedC23) {
    HpackDecoder decoder;
    HpackHeaderList list;
    std::vector<uint8_t> block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    ASSERT_EQ(decoder.decode(block, list), HpackStatus::Ok);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].name, "password");
    EXPECT_EQ(list[0].value, "secret");
    EXPECT_TRUE(list[0].never_indexed);
    EXPECT_EQ(decoder.table().count(), 0u);
}

TEST(HpackDecoder, IndexedC24) {
    HpackDecoder decoder;
    HpackHeaderList list;
    std::vector<uint8_t> block = hex("82");
    ASSERT_EQ(decoder.decode(block, list), HpackStatus::Ok);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].name, ":method");
    EXPECT_EQ(list[0].value, "GET");
    EXPECT_EQ(list[0].static_name_index, 2);
    EXPECT_FALSE(list[0].never_indexed);
}

// --- Appendix C.3 and C.4: three requests on one connection ---

const Fields kRequest1 = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Fields kRequest2 = {{":method", "GET"},
                          {":scheme", "http"},
                          {":path", "/"},
                          {":authority", "www.example.com"},
                          {"cache-control", "no-cache"}};
const Fields kRequest3 = {{":method", "GET"},
                          {":scheme", "https"},
                          {":path", "/index.html"},
                          {":authority", "www.example.com"},
                          {"custom-key", "custom-value"}};

TEST(HpackDecoder, RequestsWithoutHuffmanC3) {
    HpackDecoder decoder;
    expect_decodes(decoder, "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", kRequest1, 57);
    expect_decodes(decoder, "8286 84be 5808 6e6f 2d63 6163 6865", kRequest2, 110);
    expect_decodes(decoder,
                   "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                   kRequest3, 164);
}

TEST(HpackDecoder, RequestsWithHuffmanC4) {
    HpackDecoder decoder;
    expect_decodes(decoder, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", kRequest1, 57);
    expect_decodes(decoder, "8286 84be 5886 a8eb 1064 9cbf", kRequest2, 110);
    expect_decodes(decoder, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
                   kRequest3, 164);
}

// --- Appendix C.5 and C.6: three responses, a 256-byte table that evicts ---

const Fields kResponse1 = {{":status", "302"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse2 = {{":status", "307"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse3 = {
    {":status", "200"},
    {"cache-control", "private"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
    {"location", "https://www.example.com"},
    {"content-encoding", "gzip"},
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};

TEST(HpackDecoder, ResponsesWithoutHuffmanC5) {
    HpackDecoder decoder({.max_table_size = 256});
    expect_decodes(decoder,
                   "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 "
                   "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 "
                   "7861 6d70 6c65 2e63 6f6d",
                   kResponse1, 222);
    expect_decodes(decoder, "4803 3330 37c1 c0bf", kResponse2, 222);
    expect_decodes(decoder,
                   "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 "
                   "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 "
                   "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 "
                   "6572 7369 6f6e 3d31",
                   kResponse3, 215);
    EXPECT_EQ(decoder.table().count(), 3u);
}

TEST(HpackDecoder, ResponsesWithHuffmanC6) {
    HpackDecoder decoder({.max_table_size = 256});
    expect_decodes(decoder,
                   "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 "
                   "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                   kResponse1, 222);
    expect_decodes(decoder, "4883 640e ffc1 c0bf", kResponse2, 222);
    expect_decodes(decoder,
                   "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b "
                   "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 "
                   "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                   kResponse3, 215);
}

// One list for two blocks: the second block's fields replace the first's
// (the buffers are kept, nothing stale shows), and the list's RFC 9113 size is counted.
TEST(HpackDecoder, ListIsReusedAcrossBlocks) {
    HpackDecoder decoder;
    HpackHeaderList list;
    std::vector<uint8_t> first = hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
    std::vector<uint8_t> second = hex("8286 84be 5808 6e6f 2d63 6163 6865");
    ASSERT_EQ(decoder.decode(first, list), HpackStatus::Ok);
    ASSERT_EQ(decoder.decode(second, list), HpackStatus::Ok);
    EXPECT_EQ(fields_of(list), kRequest2);
    EXPECT_EQ(list.list_size(), 7 + 3 + 7 + 4 + 5 + 1 + 10 + 15 + 13 + 8 + 5 * 32u);
    // The next block lands in the same buffer: no allocation once grown.
    const char* text = list[0].value.data();
    ASSERT_EQ(decoder.decode(second, list), HpackStatus::Ok);
    EXPECT_EQ(list[0].value.data(), text);
    EXPECT_EQ(list[0].value, "GET");
}

// --- Huffman ---

TEST(HpackHuffman, EveryByteRoundTrips) {
    std::string all;
    for (int c = 0; c < 256; ++c)
        all.push_back(static_cast<char>(c));
    std::vector<uint8_t> coded(detail::huffman_encoded_size(all));
    ASSERT_EQ(detail::huffman_encode(all, coded.data()), coded.data() + coded.size());
    std::string decoded(detail::huffman_decoded_size_bound(coded.size()), '\0');
    char* end = detail::huffman_decode(coded.data(), coded.size(), decoded.data());
    ASSERT_NE(end, nullptr);
    decoded.resize(static_cast<size_t>(end - decoded.data()));
    EXPECT_EQ(decoded, all);
}

bool huffman_valid(std::string_view coded_hex) {
    std::vector<uint8_t> coded = hex(coded_hex);
    std::string decoded(detail::huffman_decoded_size_bound(coded.size()), '\0');
    return detail::huffman_decode(coded.data(), coded.size(), decoded.data()) != nullptr;
}

TEST(HpackHuffman, PaddingAndEosFollowSection52) {
    EXPECT_TRUE(huffman_valid(""));
    EXPECT_TRUE(huffman_valid("1f"));            // '0' (00000) and three bits of padding
    EXPECT_FALSE(huffman_valid("1e"));           // padding not all ones
    EXPECT_FALSE(huffman_valid("ff"));           // 8 bits of padding: too long
    EXPECT_FALSE(huffman_valid("1fff"));         // '0', then 11 bits of padding
    EXPECT_FALSE(huffman_valid("ffff ffff"));    // EOS (30 ones) in the string
    EXPECT_FALSE(huffman_valid("07ff ffff fc")); // '0', EOS, padding
}

// --- Dynamic table size updates (§4.2, §6.3) and eviction (§4.4) ---

TEST(HpackDecoder, SizeUpdateEvictsAndMayRepeatAtBlockStart) {
    HpackDecoder decoder;
    expect_decodes(decoder, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                   {{"custom-key", "custom-header"}}, 55);
    // 0 then 4096 (3f e1 1f): the table is emptied and back to its size, at the start.
    expect_decodes(decoder, "20 3fe1 1f 82", {{":method", "GET"}}, 0);
    EXPECT_EQ(decoder.table().max_size(), 4096u);
    EXPECT_EQ(decode(decoder, "be"), HpackStatus::CompressionError); // 62: the entry is gone
}

TEST(HpackDecoder, SizeUpdateAboveOurSettingIsAnError) {
    HpackDecoder exact({.max_table_size = 256});
    EXPECT_EQ(decode(exact, "3fe1 01 82"), HpackStatus::Ok); // 256 = 31 + 225
    HpackDecoder above({.max_table_size = 256});
    EXPECT_EQ(decode(above, "3fe2 01 82"), HpackStatus::CompressionError); // 257
}

TEST(HpackDecoder, SizeUpdateAfterAFieldIsAnError) {
    HpackDecoder decoder;
    EXPECT_EQ(decode(decoder, "82 20"), HpackStatus::CompressionError);
}

TEST(HpackDecoder, LoweredSettingRequiresAnUpdateAtTheNextBlock) {
    HpackDecoder decoder;
    expect_decodes(decoder, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                   {{"custom-key", "custom-header"}}, 55);
    decoder.set_max_table_size(40); // the entry (55) no longer fits
    EXPECT_EQ(decoder.table().count(), 0u);
    HpackDecoder copy_without_update;
    copy_without_update.set_max_table_size(40);
    EXPECT_EQ(decode(copy_without_update, "82"), HpackStatus::CompressionError);
    expect_decodes(decoder, "3f09 82", {{":method", "GET"}}, 0); // 40 = 31 + 9
}

TEST(HpackDecoder, EntryLargerThanTheTableEmptiesIt) {
    HpackDecoder decoder({.max_table_size = 56});
    expect_decodes(decoder, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                   {{"custom-key", "custom-header"}}, 55);
    // custom-key: custom-header-x is 25 + 32 > 56: not added, and the old entry is gone.
    expect_decodes(decoder, "400a 6375 7374 6f6d 2d6b 6579 0f63 7573 746f 6d2d 6865 6164 6572 2d78",
                   {{"custom-key", "custom-header-x"}}, 0);
    // The oldest entry goes first when a new one needs room.
    HpackDecoder small({.max_table_size = 100});
    expect_decodes(small, "4001 61 0161 4001 62 0162", {{"a", "a"}, {"b", "b"}}, 68);
    expect_decodes(small, "4001 63 0163 be", {{"c", "c"}, {"c", "c"}}, 68);
    expect_decodes(small, "bf", {{"b", "b"}}, 68);
    EXPECT_EQ(decode(small, "c0"), HpackStatus::CompressionError); // only two entries
}

Fields table_entries(const detail::HpackDynamicTable& table) {
    Fields entries;
    for (size_t i = 0; i < table.count(); ++i) {
        detail::HpackDynamicTable::Entry entry = table.get(i);
        entries.emplace_back(std::string(entry.name), std::string(entry.value));
    }
    return entries;
}

// An idle connection's tables are shrunk (issue 38): the entries, their order
// and the size stay, wherever the ring and the bytes had wrapped to, and the
// table grows again on the next insert.
TEST(HpackDynamicTable, ShrinkToFitKeepsTheEntries) {
    detail::HpackDynamicTable table(205);
    for (int i = 0; i < 9; ++i) // 41 bytes each, five fit: the oldest are evicted, the ring wraps
        table.insert("name-" + std::to_string(i), "v" + std::to_string(i) + "x", 0);
    const Fields before = table_entries(table);
    const size_t size = table.size();
    ASSERT_EQ(before.size(), 5u);
    EXPECT_EQ(before.front(), (std::pair<std::string, std::string>{"name-8", "v8x"}));
    table.shrink_to_fit();
    EXPECT_EQ(table_entries(table), before);
    EXPECT_EQ(table.size(), size);
    table.shrink_to_fit(); // already tight
    EXPECT_EQ(table_entries(table), before);

    table.insert("name-9", "v9x", 0);
    Fields after = table_entries(table);
    ASSERT_EQ(after.size(), 5u);
    EXPECT_EQ(after[0], (std::pair<std::string, std::string>{"name-9", "v9x"}));
    EXPECT_EQ(after[4], (std::pair<std::string, std::string>{"name-5", "v5x"}));

    table.set_max_size(0); // empty: nothing kept
    table.shrink_to_fit();
    EXPECT_EQ(table.count(), 0u);
    table.set_max_size(205);
    table.insert("a", "b", 0);
    EXPECT_EQ(table_entries(table), (Fields{{"a", "b"}}));
}

// The encoder's table forgotten between blocks (an idle connection, issue 38):
// the same fields are inserted again, at the indices a peer that kept the old
// entries expects, and the head cache's state changes.
TEST(HpackEncoder, ForgottenTableInsertsAgain) {
    HpackEncoder encoder;
    HpackDecoder peer;
    HpackHeaderList list;
    std::string first;
    encoder.encode("server", "lepus", HpackIndexing::Incremental, first);
    encoder.encode("x-one", "1", HpackIndexing::Incremental, first);
    ASSERT_EQ(peer.decode(bytes_of(first), list), HpackStatus::Ok);
    const uint64_t state = encoder.state_id();
    encoder.forget_table();
    EXPECT_NE(encoder.state_id(), state);
    EXPECT_EQ(encoder.table().count(), 0u);
    std::string second;
    encoder.encode("x-one", "1", HpackIndexing::Incremental, second);
    encoder.encode("x-two", "2", HpackIndexing::Incremental, second);
    EXPECT_EQ(static_cast<uint8_t>(second[0]), 0x40); // literal with incremental indexing
    std::string third;
    encoder.encode("x-two", "2", HpackIndexing::Incremental, third);
    encoder.encode("x-one", "1", HpackIndexing::Incremental, third);
    EXPECT_EQ(third, "\xbe\xbf"); // dynamic 62 and 63 (§2.3.3), above the forgotten ones
    ASSERT_EQ(peer.decode(bytes_of(second), list), HpackStatus::Ok);
    ASSERT_EQ(peer.decode(bytes_of(third), list), HpackStatus::Ok);
    EXPECT_EQ(fields_of(list), (Fields{{"x-two", "2"}, {"x-one", "1"}}));
    EXPECT_EQ(peer.table().count(), 4u); // the peer still holds the forgotten two
    encoder.forget_table();              // the new entries go too
    EXPECT_EQ(encoder.table().count(), 0u);
}

// --- Errors: never undefined, always CompressionError ---

TEST(HpackDecoder, IndexZeroAndOutOfRange) {
    HpackDecoder decoder;
    EXPECT_EQ(decode(decoder, "80"), HpackStatus::CompressionError);
    HpackDecoder empty_table;
    EXPECT_EQ(decode(empty_table, "be"), HpackStatus::CompressionError); // 62, table empty
    HpackDecoder name_out_of_range;
    EXPECT_EQ(decode(name_out_of_range, "7f00 0161"), HpackStatus::CompressionError); // name 63
    HpackDecoder huge;
    EXPECT_EQ(decode(huge, "ff ffff ffff 0f"), HpackStatus::CompressionError);
}

TEST(HpackDecoder, TruncatedBlocks) {
    const std::string_view blocks[] = {
        "ff",              // an integer with its continuation missing
        "ff 80",           // ... and cut after a continuation byte
        "40",              // a literal with no name
        "4003 6162",       // a name shorter than its length
        "4001 61",         // no value
        "4001 61 05 6162", // a value shorter than its length
        "0f",              // a 4-bit index waiting for more
        "3f",              // a size update waiting for more
        "4081",            // a Huffman name of 1 byte, missing
    };
    for (std::string_view block : blocks) {
        HpackDecoder decoder;
        EXPECT_EQ(decode(decoder, block), HpackStatus::CompressionError) << block;
    }
}

TEST(HpackDecoder, IntegerOverflow) {
    HpackDecoder decoder;
    // 2^32 as a string length: past what the decoder accepts.
    EXPECT_EQ(decode(decoder, "407f 81ff ffff 0f"), HpackStatus::CompressionError);
    // A size update of 31 padded with zero continuations: legal up to 28 bits
    // of shift, refused beyond (as nghttp2 does).
    HpackDecoder padded;
    EXPECT_EQ(decode(padded, "3f 8080 8080 00 82"), HpackStatus::Ok);
    EXPECT_EQ(padded.table().max_size(), 31u);
    HpackDecoder too_long;
    EXPECT_EQ(decode(too_long, "3f 8080 8080 8000 82"), HpackStatus::CompressionError);
}

TEST(HpackDecoder, BadHuffmanInAStringIsAnError) {
    HpackDecoder eos;
    EXPECT_EQ(decode(eos, "4084 ffff ffff 0161"), HpackStatus::CompressionError);
    HpackDecoder padding;
    EXPECT_EQ(decode(padding, "4081 1e 0161"), HpackStatus::CompressionError);
    HpackDecoder long_padding;
    EXPECT_EQ(decode(long_padding, "4082 1fff 0161"), HpackStatus::CompressionError);
}

// The HPACK bomb: one 4 KB entry referenced over and over from a small block.
TEST(HpackDecoder, HeaderListLimitStopsABombAndKeepsTheTableInStep) {
    HpackDecoder decoder({.max_table_size = 4096, .max_header_list_size = 16 * 1024});
    std::string block = "\x40\x01x\x7f";
    const size_t value_size = 4040; // 4073 with x and 32: y: z (34) evicts it
    block += static_cast<char>(0x80 | ((value_size - 127) & 0x7f));
    block += static_cast<char>((value_size - 127) >> 7);
    block += std::string(value_size, 'v');
    block += std::string(1000, '\xbe'); // 62, a thousand times: 4 MB decoded
    block += "\x40\x01y\x01z";          // the table must still learn this one
    HpackHeaderList list;
    EXPECT_EQ(decoder.decode(bytes_of(block), list), HpackStatus::HeaderListTooLarge);
    EXPECT_TRUE(list.empty());
    ASSERT_EQ(decoder.table().count(), 1u); // y: z, the 4 KB entry evicted by it
    HpackHeaderList next;
    std::vector<uint8_t> be = hex("be");
    ASSERT_EQ(decoder.decode(be, next), HpackStatus::Ok);
    EXPECT_EQ(fields_of(next), (Fields{{"y", "z"}}));
}

// --- The encoder's choices ---

std::string hex_of(const std::string& bytes) {
    static const char kDigits[] = "0123456789abcdef";
    std::string text;
    for (unsigned char c : bytes) {
        text += kDigits[c >> 4];
        text += kDigits[c & 15];
    }
    return text;
}

TEST(HpackEncoder, StatusByIndexOrAsThreeDigits) {
    HpackEncoder encoder;
    std::string block;
    encoder.encode_status(200, block);
    encoder.encode_status(404, block);
    encoder.encode_status(302, block); // literal without indexing, name 8
    EXPECT_EQ(hex_of(block), "888d"
                             "0803333032");
}

TEST(HpackEncoder, RepeatedValuesBecomeOneIndexAndChangingOnesStayRaw) {
    HpackEncoder encoder;
    std::string first;
    encoder.begin_block(first); // nothing pending at the default size
    encoder.encode("server", "lepus", HpackIndexing::Incremental, first);
    encoder.encode("content-length", "612", HpackIndexing::WithoutIndexing, first);
    // server (54) with incremental indexing, "lepus" Huffman-coded (4 bytes);
    // content-length (28) without indexing, "612" as it is.
    std::string lepus(detail::huffman_encoded_size("lepus"), '\0');
    detail::huffman_encode("lepus", reinterpret_cast<uint8_t*>(lepus.data()));
    ASSERT_LT(lepus.size(), 5u);
    EXPECT_EQ(hex_of(first), "76" + hex_of(std::string(1, static_cast<char>(0x80 | lepus.size()))) +
                                 hex_of(lepus) + "0f0d03363132");
    std::string second;
    encoder.encode("server", "lepus", HpackIndexing::Incremental, second);
    EXPECT_EQ(hex_of(second), "be"); // dynamic index 62
    std::string never;
    encoder.encode("set-cookie", "a=b", HpackIndexing::NeverIndexed, never);
    EXPECT_EQ(hex_of(never), "1f28"
                             "03613d62"); // name 55 in a 4-bit prefix, raw value
    HpackDecoder decoder;
    HpackHeaderList list;
    ASSERT_EQ(decoder.decode(bytes_of(first), list), HpackStatus::Ok);
    EXPECT_EQ(fields_of(list), (Fields{{"server", "lepus"}, {"content-length", "612"}}));
}

// encode_known (the caller gives the static index) writes what encode
// writes, long values (past the encoder's stack buffer) included.
TEST(HpackEncoder, KnownStaticNamesEncodeAsLookedUpOnes) {
    HpackEncoder looked_up, known;
    std::string a, b;
    const std::string long_value(1000, 'v');
    for (auto indexing : {HpackIndexing::Incremental, HpackIndexing::WithoutIndexing}) {
        for (std::string_view value : {std::string_view("lepus"), std::string_view(long_value)}) {
            looked_up.encode("server", value, indexing, a);
            known.encode_known(54, "server", value, indexing, b);
            looked_up.encode("x-own", value, indexing, a);
            known.encode_known(0, "x-own", value, indexing, b);
        }
    }
    EXPECT_EQ(hex_of(a), hex_of(b));
}

// state_id names the table's contents: it moves when an entry goes in (or
// the size changes), not when a field is sent from the tables, and two
// encoders never share one (the HTTP/2 engine's head cache relies on it).
TEST(HpackEncoder, StateIdMovesWithTheTableOnly) {
    HpackEncoder encoder, other;
    EXPECT_NE(encoder.state_id(), other.state_id());
    std::string out;
    uint64_t start = encoder.state_id();
    encoder.encode("content-type", "text/html", HpackIndexing::Incremental, out);
    uint64_t after_insert = encoder.state_id();
    EXPECT_NE(after_insert, start);
    encoder.encode("content-type", "text/html", HpackIndexing::Incremental, out); // a hit
    encoder.encode(":method", "GET", HpackIndexing::Incremental, out);            // static
    encoder.encode("etag", "\"1\"", HpackIndexing::WithoutIndexing, out);
    EXPECT_EQ(encoder.state_id(), after_insert);
    other.encode("x-a", "1", HpackIndexing::Incremental, out);
    EXPECT_NE(other.state_id(), after_insert);
    encoder.set_peer_max_table_size(0);
    EXPECT_NE(encoder.state_id(), after_insert);
}

TEST(HpackEncoder, SmallerTableIsAnnouncedAtTheFirstBlock) {
    HpackEncoder encoder(100);
    std::string block;
    encoder.begin_block(block);
    encoder.encode_status(200, block);
    EXPECT_EQ(hex_of(block), "3f45"
                             "88"); // size update to 100 = 31 + 69
    // The peer lowers its setting to 0 and raises it again before the next block:
    // the smallest size goes first, then the size in use.
    encoder.set_peer_max_table_size(0);
    encoder.set_peer_max_table_size(4096);
    std::string next;
    encoder.begin_block(next);
    EXPECT_EQ(hex_of(next), "20"
                            "3f45");
}

} // namespace
} // namespace lepus
