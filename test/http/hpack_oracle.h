// nghttp2's HPACK inflater as an oracle for lepus's decoder and encoder
// (src/http/hpack.h), shared by test/http/hpack_differential_test.cc and
// test/fuzz/hpack_fuzz.cc. A test-only header.
#pragma once

#include "http/hpack.h"

#include <cstdint>
#include <nghttp2/nghttp2.h>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace lepus::hpack_oracle {

struct Field {
    std::string name;
    std::string value;
    bool never_indexed = false;
    bool operator==(const Field&) const = default;
};

// For GoogleTest's messages: name, value and the never-indexed mark, escaped.
inline void PrintTo(const Field& field, std::ostream* out) {
    auto escaped = [&](const std::string& text) {
        for (unsigned char c : text) {
            if (c >= 0x20 && c < 0x7f && c != '\\') {
                *out << c;
            } else {
                static const char kDigits[] = "0123456789abcdef";
                *out << "\\x" << kDigits[c >> 4] << kDigits[c & 15];
            }
        }
    };
    escaped(field.name);
    *out << ": ";
    escaped(field.value);
    if (field.never_indexed) *out << " (never indexed)";
}

// A block's outcome: the fields, or a failure (CompressionError; the decoder is then dead).
struct Outcome {
    bool ok = false;
    std::vector<Field> fields;
    bool operator==(const Outcome&) const = default;
};

// nghttp2's decoder with our SETTINGS_HEADER_TABLE_SIZE (as acknowledged by the peer).
class Inflater {
public:
    explicit Inflater(uint32_t max_table_size) {
        nghttp2_hd_inflate_new(&inflater_);
        if (max_table_size != kHpackDefaultTableSize)
            nghttp2_hd_inflate_change_table_size(inflater_, max_table_size);
    }
    ~Inflater() { nghttp2_hd_inflate_del(inflater_); }
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;

    // The SETTINGS_HEADER_TABLE_SIZE changed and was acknowledged.
    void set_max_table_size(uint32_t size) {
        nghttp2_hd_inflate_change_table_size(inflater_, size);
    }

    Outcome decode(std::span<const uint8_t> block) {
        Outcome outcome;
        const uint8_t* at = block.data();
        size_t left = block.size();
        for (;;) {
            nghttp2_nv field;
            int flags = 0;
            ssize_t used = nghttp2_hd_inflate_hd2(inflater_, &field, &flags, at, left, 1);
            if (used < 0) return Outcome{};
            at += used;
            left -= static_cast<size_t>(used);
            if (flags & NGHTTP2_HD_INFLATE_EMIT)
                outcome.fields.push_back(
                    Field{std::string(reinterpret_cast<const char*>(field.name), field.namelen),
                          std::string(reinterpret_cast<const char*>(field.value), field.valuelen),
                          (field.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0});
            if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
            if (used == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return Outcome{}; // no progress
        }
        nghttp2_hd_inflate_end_headers(inflater_);
        outcome.ok = true;
        return outcome;
    }

private:
    nghttp2_hd_inflater* inflater_ = nullptr;
};

// Our decoder, with no header list limit in the way (the oracle has none).
class Decoder {
public:
    explicit Decoder(uint32_t max_table_size)
        : decoder_({.max_table_size = kHpackDefaultTableSize, .max_header_list_size = SIZE_MAX}) {
        if (max_table_size != kHpackDefaultTableSize) decoder_.set_max_table_size(max_table_size);
    }

    void set_max_table_size(uint32_t size) { decoder_.set_max_table_size(size); }

    Outcome decode(std::span<const uint8_t> block) {
        Outcome outcome;
        if (decoder_.decode(block, list_) != HpackStatus::Ok) return outcome;
        outcome.ok = true;
        for (size_t i = 0; i < list_.size(); ++i)
            outcome.fields.push_back(Field{std::string(list_[i].name), std::string(list_[i].value),
                                           list_[i].never_indexed});
        return outcome;
    }

private:
    HpackDecoder decoder_;
    HpackHeaderList list_;
};

// nghttp2's encoder, to produce blocks as a real peer would.
class Deflater {
public:
    explicit Deflater(uint32_t max_table_size) {
        nghttp2_hd_deflate_new(&deflater_, max_table_size);
    }
    ~Deflater() { nghttp2_hd_deflate_del(deflater_); }
    Deflater(const Deflater&) = delete;
    Deflater& operator=(const Deflater&) = delete;

    // Uses a table of `size` from the next block on (which starts with the update).
    void change_table_size(uint32_t size) { nghttp2_hd_deflate_change_table_size(deflater_, size); }

    std::vector<uint8_t> encode(const std::vector<Field>& fields) {
        std::vector<nghttp2_nv> nva;
        for (const Field& field : fields)
            nva.push_back(nghttp2_nv{
                reinterpret_cast<uint8_t*>(const_cast<char*>(field.name.data())),
                reinterpret_cast<uint8_t*>(const_cast<char*>(field.value.data())),
                field.name.size(), field.value.size(),
                static_cast<uint8_t>(field.never_indexed ? NGHTTP2_NV_FLAG_NO_INDEX : 0)});
        std::vector<uint8_t> block(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()));
        ssize_t size =
            nghttp2_hd_deflate_hd(deflater_, block.data(), block.size(), nva.data(), nva.size());
        block.resize(size < 0 ? 0 : static_cast<size_t>(size));
        return block;
    }

private:
    nghttp2_hd_deflater* deflater_ = nullptr;
};

} // namespace lepus::hpack_oracle
