// The HPACK Huffman code (RFC 7541 §5.2, Appendix B): encoded size, encoder and
// a table-driven decoder. Internal to src/http/hpack_*.cc and their tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lepus::detail {

// Bytes the Huffman coding of `text` takes, padding included.
size_t huffman_encoded_size(std::string_view text);

// Writes the Huffman coding of `text` at `out` (huffman_encoded_size(text)
// bytes, the last padded with the most significant bits of EOS, §5.2) and
// returns the end of what was written.
uint8_t* huffman_encode(std::string_view text, uint8_t* out);

// Most bytes `encoded_size` bytes of Huffman code can decode to: the shortest
// code is 5 bits.
constexpr size_t huffman_decoded_size_bound(size_t encoded_size) {
    return encoded_size * 8 / 5 + 1;
}

// Decodes `size` bytes of Huffman code into `out` (room for
// huffman_decoded_size_bound(size) bytes). Returns the end of the decoded text,
// or nullptr when the code holds EOS or ends in padding that is longer than 7
// bits or not all ones (§5.2: both are decoding errors).
char* huffman_decode(const uint8_t* in, size_t size, char* out);

} // namespace lepus::detail
