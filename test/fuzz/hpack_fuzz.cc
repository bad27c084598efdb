// libFuzzer driver for the HPACK decoder and encoder (src/http/hpack.h),
// differential against nghttp2's (issue 38): the input's header blocks go, in
// order, through our decoder and nghttp2's inflater, which must return the same
// fields or both fail; every list that decodes is encoded again by our encoder
// and must come out of a second nghttp2 inflater unchanged.
//
// Input: FuzzInput's two control bytes (the split mode is not used: a block is
// decoded whole), options() choosing our SETTINGS_HEADER_TABLE_SIZE (low three
// bits), the encoder's own table size (next two) and its Huffman choice (next
// one); then the blocks, each after a byte giving its length.
#include "../http/hpack_oracle.h"
#include "fuzz_input.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using lepus::hpack_oracle::Field;
    using lepus::hpack_oracle::Outcome;
    lepus::fuzz::FuzzInput input(data, size);
    const unsigned options = input.options();
    const uint32_t table_sizes[] = {4096, 0, 64, 256, 100, 1024, 4097, 8192};
    const uint32_t table_size = table_sizes[options & 7];
    const uint32_t encoder_sizes[] = {4096, 0, 200, 65536};

    lepus::hpack_oracle::Inflater oracle(table_size);
    lepus::hpack_oracle::Decoder ours(table_size);
    lepus::HpackEncoder encoder(encoder_sizes[(options >> 3) & 3]);
    encoder.set_huffman_for_literals((options >> 5) & 1);
    lepus::hpack_oracle::Inflater peer(lepus::kHpackDefaultTableSize);

    std::span<const char> payload = input.payload();
    while (!payload.empty()) {
        const size_t length =
            std::min<size_t>(static_cast<uint8_t>(payload[0]), payload.size() - 1);
        // An exact-size heap copy: a read past the block is an ASan report.
        std::vector<uint8_t> block(payload.begin() + 1,
                                   payload.begin() + 1 + static_cast<ptrdiff_t>(length));
        block.shrink_to_fit();
        payload = payload.subspan(1 + length);

        Outcome expected = oracle.decode(block);
        Outcome got = ours.decode(block);
        LEPUS_FUZZ_CHECK(got.ok == expected.ok);
        LEPUS_FUZZ_CHECK(got.fields == expected.fields);
        if (!got.ok) break; // a COMPRESSION_ERROR ends the connection

        std::string encoded;
        encoder.begin_block(encoded);
        for (size_t i = 0; i < got.fields.size(); ++i) {
            const Field& field = got.fields[i];
            lepus::HpackIndexing indexing = field.never_indexed ? lepus::HpackIndexing::NeverIndexed
                                            : (i + length) % 2 == 0
                                                ? lepus::HpackIndexing::Incremental
                                                : lepus::HpackIndexing::WithoutIndexing;
            encoder.encode(field.name, field.value, indexing, encoded);
        }
        Outcome again = peer.decode(
            std::span(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size()));
        LEPUS_FUZZ_CHECK(again.ok);
        LEPUS_FUZZ_CHECK(again.fields == got.fields);
    }
    return 0;
}
