// The HPACK Huffman code (RFC 7541 Appendix B). The decoder reads four bits at
// a time through a state table computed at compile time from the code table:
// a state is an inner node of the code tree (where the bits read since the last
// symbol lead), and each (state, nibble) entry gives the next state, the
// symbol completed on the way if any, and whether stopping there is allowed.
// The shortest code is 5 bits, so a nibble completes at most one symbol.
#include "http/detail/hpack_huffman.h"

#include <array>

namespace lepus::detail {

namespace {

struct Code {
    uint32_t bits;  // right-aligned
    uint8_t length; // 5..30
};

// Symbols 0..255 and EOS (256), RFC 7541 Appendix B.
constexpr Code kCodes[257] = {
#include "hpack_huffman_codes.inc"
};

constexpr int kEos = 256;
constexpr int kInnerNodes = 256; // a full binary tree of 257 leaves

// The code tree: child >= 0 is an inner node, child < 0 is the leaf of symbol -child - 1.
struct Tree {
    std::array<std::array<int16_t, 2>, kInnerNodes> child{};
};

constexpr Tree build_tree() {
    Tree tree;
    int nodes = 1; // node 0 is the root
    for (int symbol = 0; symbol <= kEos; ++symbol) {
        int node = 0;
        for (int bit = kCodes[symbol].length - 1; bit >= 0; --bit) {
            int branch = static_cast<int>((kCodes[symbol].bits >> bit) & 1);
            if (bit == 0) {
                tree.child[node][branch] = static_cast<int16_t>(-symbol - 1);
            } else {
                if (tree.child[node][branch] == 0)
                    tree.child[node][branch] = static_cast<int16_t>(nodes++);
                node = tree.child[node][branch];
            }
        }
    }
    return tree;
}

enum : uint8_t {
    kEmit = 1,   // `symbol` was completed
    kAccept = 2, // the block may end here: the bits since the last symbol are 0..7 ones (§5.2)
    kFail = 4,   // EOS was read (§5.2: an error)
};

struct Step {
    uint8_t next;
    uint8_t flags;
    uint8_t symbol;
    uint8_t unused; // four bytes: an entry's address is a shift, not a multiplication
};

struct DecodeTable {
    std::array<std::array<Step, 16>, kInnerNodes> steps{};
};

constexpr DecodeTable build_decode_table() {
    constexpr Tree tree = build_tree();
    // Inner nodes reached from the root by up to seven 1 bits: a prefix of EOS
    // short enough to be padding.
    std::array<bool, kInnerNodes> accepting{};
    for (int node = 0, depth = 0; depth <= 7 && node >= 0; ++depth) {
        accepting[node] = true;
        node = tree.child[node][1];
    }
    DecodeTable table;
    for (int state = 0; state < kInnerNodes; ++state) {
        for (int nibble = 0; nibble < 16; ++nibble) {
            Step step{};
            int node = state;
            for (int bit = 3; bit >= 0; --bit) {
                int child = tree.child[node][(nibble >> bit) & 1];
                if (child >= 0) {
                    node = child;
                    continue;
                }
                int symbol = -child - 1;
                if (symbol == kEos) {
                    step.flags = kFail;
                    break;
                }
                step.flags |= kEmit;
                step.symbol = static_cast<uint8_t>(symbol);
                node = 0;
            }
            if (!(step.flags & kFail)) {
                step.next = static_cast<uint8_t>(node);
                if (accepting[node]) step.flags |= kAccept;
            }
            table.steps[state][nibble] = step;
        }
    }
    return table;
}

constexpr DecodeTable kDecode = build_decode_table();

} // namespace

size_t huffman_encoded_size(std::string_view text) {
    size_t bits = 0;
    for (char c : text)
        bits += kCodes[static_cast<uint8_t>(c)].length;
    return (bits + 7) / 8;
}

uint8_t* huffman_encode(std::string_view text, uint8_t* out) {
    // At most 7 bits wait in `pending` between symbols, plus a code of up to 30.
    uint64_t pending = 0;
    unsigned pending_bits = 0;
    for (char c : text) {
        const Code& code = kCodes[static_cast<uint8_t>(c)];
        pending = (pending << code.length) | code.bits;
        pending_bits += code.length;
        while (pending_bits >= 8) {
            pending_bits -= 8;
            *out++ = static_cast<uint8_t>(pending >> pending_bits);
        }
    }
    if (pending_bits > 0) // §5.2: pad with the high bits of EOS (all ones)
        *out++ = static_cast<uint8_t>((pending << (8 - pending_bits)) | (0xffu >> pending_bits));
    return out;
}

char* huffman_decode(const uint8_t* in, size_t size, char* out) {
    // Branch-free per nibble: the symbol is always stored and the output moves
    // on only when one was completed (the store stays within the bound: it is
    // at most one past the symbols written); a failure is remembered and
    // reported at the end, its step leading back to the root.
    uint8_t state = 0;
    uint8_t flags = kAccept; // an empty string is valid
    uint8_t failed = 0;
    for (const uint8_t* end = in + size; in != end; ++in) {
        const Step& high = kDecode.steps[state][*in >> 4];
        *out = static_cast<char>(high.symbol);
        out += high.flags & kEmit;
        const Step& low = kDecode.steps[high.next][*in & 15];
        *out = static_cast<char>(low.symbol);
        out += low.flags & kEmit;
        failed |= high.flags | low.flags;
        state = low.next;
        flags = low.flags;
    }
    return (failed & kFail) == 0 && (flags & kAccept) ? out : nullptr;
}

} // namespace lepus::detail
