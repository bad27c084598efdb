// HPACK against nghttp2 (issue 38 asks for its decoder as the oracle): blocks
// from RFC 7541 Appendix C, blocks nghttp2's encoder makes of random header
// lists (with table size changes), and mutations of those, go through both
// decoders, which must return the same fields or both fail; our encoder's
// blocks must decode, by nghttp2, to what was encoded.
#include "hpack_oracle.h"

#include <gtest/gtest.h>
#include <random>

namespace lepus {
namespace {

using hpack_oracle::Field;
using hpack_oracle::Outcome;

const std::string_view kNames[] = {":method",    ":path",         ":scheme",         ":authority",
                                   ":status",    "accept",        "accept-encoding", "user-agent",
                                   "cookie",     "content-type",  "content-length",  "date",
                                   "etag",       "server",        "cache-control",   "x-custom",
                                   "set-cookie", "authorization", "if-none-match",   "vary"};

class Generator {
public:
    explicit Generator(uint32_t seed) : random_(seed) {}

    size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random_); }

    std::string text(size_t max_length) {
        std::string text(below(max_length + 1), '\0');
        const size_t kind = below(3);
        for (char& c : text) {
            if (kind == 0)
                c = static_cast<char>('a' + below(26));
            else if (kind == 1)
                c = static_cast<char>(0x20 + below(95));
            else
                c = static_cast<char>(below(256)); // HPACK carries any octet
        }
        return text;
    }

    std::vector<Field> fields() {
        std::vector<Field> fields(below(12));
        for (Field& field : fields) {
            field.name = below(4) != 0 ? std::string(kNames[below(std::size(kNames))]) : text(20);
            field.value = below(8) != 0 ? text(below(10) == 0 ? 600 : 40) : "GET";
            field.never_indexed = below(10) == 0;
        }
        return fields;
    }

    std::vector<uint8_t> mutate(std::vector<uint8_t> block) {
        switch (below(5)) {
        case 0:
            if (!block.empty()) block[below(block.size())] ^= static_cast<uint8_t>(1u << below(8));
            break;
        case 1:
            block.resize(below(block.size() + 1));
            break;
        case 2:
            block.insert(block.begin() + static_cast<ptrdiff_t>(below(block.size() + 1)),
                         static_cast<uint8_t>(below(256)));
            break;
        case 3:
            if (!block.empty()) block[below(block.size())] = static_cast<uint8_t>(below(256));
            break;
        default:
            block.push_back(static_cast<uint8_t>(0x80 | below(128))); // an index, maybe too far
            break;
        }
        return block;
    }

private:
    std::mt19937 random_;
};

// Runs `blocks` through both decoders, block by block, until one fails.
// With `must_decode`, every block must decode too.
void expect_same(const std::vector<std::vector<uint8_t>>& blocks, uint32_t table_size,
                 const std::string& where, bool must_decode = false) {
    hpack_oracle::Inflater oracle(table_size);
    hpack_oracle::Decoder ours(table_size);
    for (size_t i = 0; i < blocks.size(); ++i) {
        Outcome expected = oracle.decode(blocks[i]);
        Outcome got = ours.decode(blocks[i]);
        ASSERT_EQ(got.ok, expected.ok) << where << ", block " << i;
        ASSERT_EQ(got.fields, expected.fields) << where << ", block " << i;
        if (must_decode) {
            ASSERT_TRUE(got.ok) << where << ", block " << i;
        }
        if (!got.ok) return;
    }
}

std::vector<uint8_t> hex(std::string_view text) {
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < text.size(); i += 2)
        bytes.push_back(
            static_cast<uint8_t>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    return bytes;
}

TEST(HpackDifferential, AppendixCBlocks) {
    // C.3 to C.6 as sequences; C.5 and C.6 start with the update to the 256
    // bytes they were made for, which our SETTINGS of 256 requires.
    expect_same({hex("828684410f7777772e6578616d706c652e636f6d"),
                 hex("828684be58086e6f2d6361636865"),
                 hex("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")},
                4096, "C.3", true);
    expect_same({hex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), hex("828684be5886a8eb10649cbf"),
                 hex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")},
                4096, "C.4", true);
    expect_same({hex("3fe101"
                     "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31"
                     "333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d"),
                 hex("4803333037c1c0bf"),
                 hex("88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a"
                     "69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d"
                     "61782d6167653d333630303b2076657273696f6e3d31")},
                256, "C.5", true);
    expect_same({hex("3fe101"
                     "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e91"
                     "9d29ad171863c78f0b97c8e9ae82ae43d3"),
                 hex("4883640effc1c0bf"),
                 hex("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821d"
                     "d7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b106"
                     "3d5007")},
                256, "C.6", true);
    // Integers padded with zero continuation bytes: both take them up to 28
    // bits of shift and refuse them beyond.
    expect_same({hex("3f8080808000"), hex("82")}, 4096, "padded to shift 28", true);
    expect_same({hex("3f808080808000")}, 4096, "padded to shift 35");
    // Without the update, a decoder whose setting went down to 256 must refuse.
    expect_same({hex("4882640258")}, 256, "C.6 without the update");
}

// nghttp2's encoder, random lists, tables of several sizes changing between blocks.
TEST(HpackDifferential, RandomListsFromNghttp2sEncoder) {
    Generator generate(38);
    for (int round = 0; round < 1500; ++round) {
        const uint32_t table_sizes[] = {0, 64, 256, 4096, 8192};
        const uint32_t table_size = table_sizes[generate.below(std::size(table_sizes))];
        hpack_oracle::Deflater deflater(std::min(table_size, 4096u));
        std::vector<std::vector<uint8_t>> blocks;
        std::vector<std::vector<Field>> lists;
        for (int b = 0; b < 6; ++b) {
            if (generate.below(5) == 0) // never above our setting: that would be the peer's error
                deflater.change_table_size(static_cast<uint32_t>(generate.below(table_size + 1)));
            lists.push_back(generate.fields());
            blocks.push_back(deflater.encode(lists.back()));
        }
        const std::string where = "round " + std::to_string(round);
        hpack_oracle::Decoder ours(table_size);
        for (size_t i = 0; i < blocks.size(); ++i) {
            Outcome got = ours.decode(blocks[i]);
            ASSERT_TRUE(got.ok) << where << ", block " << i;
            // nghttp2 marks some fields never indexed on its own (authorization,
            // short cookies): the mark is compared with its decoder's, below.
            for (Field& field : got.fields)
                field.never_indexed = false;
            for (Field& field : lists[i])
                field.never_indexed = false;
            ASSERT_EQ(got.fields, lists[i]) << where << ", block " << i;
        }
        expect_same(blocks, table_size, where);
        // Then the same blocks with one of them damaged.
        for (int m = 0; m < 8; ++m) {
            std::vector<std::vector<uint8_t>> damaged = blocks;
            size_t at = generate.below(damaged.size());
            damaged[at] = generate.mutate(damaged[at]);
            if (generate.below(4) == 0) damaged[at] = generate.mutate(damaged[at]);
            expect_same(damaged, table_size, where + ", mutation " + std::to_string(m));
            if (HasFatalFailure()) return;
        }
    }
}

// Random bytes, mostly garbage: both must refuse alike.
TEST(HpackDifferential, RandomBytes) {
    Generator generate(7);
    for (int round = 0; round < 20000; ++round) {
        std::vector<uint8_t> block(generate.below(24));
        for (uint8_t& byte : block)
            byte = static_cast<uint8_t>(generate.below(256));
        expect_same({block, block}, 4096, "round " + std::to_string(round));
        if (HasFatalFailure()) return;
    }
}

// Our encoder's blocks, decoded by nghttp2: the same fields, never-indexed kept,
// with the peer's table size changing under the encoder and the encoder
// forgetting its table between blocks (the peer keeping the entries).
TEST(HpackDifferential, OurEncoderThroughNghttp2) {
    Generator generate(1138);
    for (int round = 0; round < 1000; ++round) {
        const uint32_t own_sizes[] = {0, 100, 512, 4096, 65536};
        HpackEncoder encoder(own_sizes[generate.below(std::size(own_sizes))]);
        encoder.set_huffman_for_literals(generate.below(2) == 0);
        hpack_oracle::Inflater peer(4096);
        for (int b = 0; b < 8; ++b) {
            if (generate.below(6) == 0) {
                const uint32_t peer_size = static_cast<uint32_t>(generate.below(5000));
                peer.set_max_table_size(peer_size); // the peer's SETTINGS, acknowledged
                encoder.set_peer_max_table_size(peer_size);
            }
            if (generate.below(4) == 0) encoder.forget_table(); // went idle (issue 38)
            std::vector<Field> fields = generate.fields();
            std::string block;
            encoder.begin_block(block);
            const unsigned status = generate.below(2) == 0 ? 200 : 100 + generate.below(500);
            encoder.encode_status(status, block);
            for (Field& field : fields) {
                HpackIndexing indexing = field.never_indexed      ? HpackIndexing::NeverIndexed
                                         : generate.below(2) == 0 ? HpackIndexing::Incremental
                                                                  : HpackIndexing::WithoutIndexing;
                encoder.encode(field.name, field.value, indexing, block);
            }
            fields.insert(fields.begin(), Field{":status", std::to_string(status), false});
            Outcome decoded = peer.decode(
                std::span(reinterpret_cast<const uint8_t*>(block.data()), block.size()));
            ASSERT_TRUE(decoded.ok) << "round " << round << ", block " << b;
            ASSERT_EQ(decoded.fields, fields) << "round " << round << ", block " << b;
        }
    }
}

} // namespace
} // namespace lepus
