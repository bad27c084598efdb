#include "http/compress.h"

#include "base/ascii.h"

#include <array>
#include <brotli/encode.h>
#include <charconv>
#include <zlib.h>
#include <zstd.h>

namespace lepus {
namespace {

constexpr int kGzipOnce = 6, kBrotliOnce = 6, kZstdOnce = 12;
constexpr int kGzipStream = 1, kBrotliStream = 4, kZstdStream = 3;

// "0.5" -> 500; a malformed q-value counts as 0 (not acceptable), RFC 9110 §12.4.2.
int parse_q(std::string_view text) {
    text = trim_ows(text);
    if (text.empty() || (text[0] != '0' && text[0] != '1')) return 0;
    int value = (text[0] - '0') * 1000;
    if (text.size() > 1) {
        if (text[1] != '.') return 0;
        int scale = 100;
        for (char c : text.substr(2)) {
            if (c < '0' || c > '9' || scale == 0) return 0;
            value += (c - '0') * scale;
            scale /= 10;
        }
    }
    return value > 1000 ? 0 : value;
}

} // namespace

std::string_view coding_name(Coding coding) {
    switch (coding) {
    case Coding::Gzip:
        return "gzip";
    case Coding::Brotli:
        return "br";
    case Coding::Zstd:
        return "zstd";
    case Coding::Identity:
        break;
    }
    return "";
}

bool CodingSet::has(Coding coding) const {
    switch (coding) {
    case Coding::Gzip:
        return gzip;
    case Coding::Brotli:
        return brotli;
    case Coding::Zstd:
        return zstd;
    case Coding::Identity:
        break;
    }
    return true;
}

Negotiated negotiate_coding(std::string_view accept_encoding, CodingSet offered) {
    if (trim_ows(accept_encoding).empty()) return {};
    // q-values in thousandths; -1: not named.
    std::array<int, 4> named{-1, -1, -1, -1}; // by Coding
    int star = -1;
    while (!accept_encoding.empty()) {
        size_t comma = accept_encoding.find(',');
        std::string_view element = accept_encoding.substr(0, comma);
        accept_encoding.remove_prefix(comma == std::string_view::npos ? accept_encoding.size()
                                                                      : comma + 1);
        size_t semicolon = element.find(';');
        std::string_view name = trim_ows(element.substr(0, semicolon));
        int q = 1000;
        if (semicolon != std::string_view::npos) {
            std::string_view params = trim_ows(element.substr(semicolon + 1));
            if (params.size() >= 2 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=')
                q = parse_q(params.substr(2));
        }
        if (name.empty()) continue;
        if (name == "*") {
            star = q;
        } else if (ascii_iequals(name, "gzip") || ascii_iequals(name, "x-gzip")) {
            named[size_t(Coding::Gzip)] = q;
        } else if (ascii_iequals(name, "br")) {
            named[size_t(Coding::Brotli)] = q;
        } else if (ascii_iequals(name, "zstd")) {
            named[size_t(Coding::Zstd)] = q;
        } else if (ascii_iequals(name, "identity")) {
            named[size_t(Coding::Identity)] = q;
        }
    }
    auto quality = [&](Coding coding) {
        int q = named[size_t(coding)];
        if (q >= 0) return q;
        if (star >= 0) return star;
        return coding == Coding::Identity ? 1 : 0; // identity: acceptable, least preferred
    };
    Negotiated best{Coding::Identity, false};
    int best_q = 0;
    for (Coding coding : {Coding::Brotli, Coding::Zstd, Coding::Gzip, Coding::Identity}) {
        if (!offered.has(coding)) continue;
        int q = quality(coding);
        if (q > best_q) {
            best = {coding, true};
            best_q = q;
        }
    }
    return best;
}

bool is_compressible_type(std::string_view content_type) {
    std::string_view type = trim_ows(content_type.substr(0, content_type.find(';')));
    if (type.size() > 5 && ascii_iequals(type.substr(0, 5), "text/")) return true;
    static constexpr std::string_view kTypes[] = {"application/javascript",
                                                  "application/x-javascript",
                                                  "application/json",
                                                  "application/ld+json",
                                                  "application/manifest+json",
                                                  "application/xml",
                                                  "application/rss+xml",
                                                  "application/atom+xml",
                                                  "application/xhtml+xml",
                                                  "application/wasm",
                                                  "application/x-font-ttf",
                                                  "font/ttf",
                                                  "font/otf",
                                                  "image/svg+xml",
                                                  "image/x-icon",
                                                  "image/vnd.microsoft.icon",
                                                  "application/vnd.ms-fontobject"};
    for (std::string_view known : kTypes)
        if (ascii_iequals(type, known)) return true;
    return false;
}

std::string_view strong_form_of_etags(std::string_view value, std::string& storage) {
    if (value.find("W/") == std::string_view::npos) return value;
    storage.clear();
    // #entity-tag: [W/] DQUOTE *etagc DQUOTE, comma-separated with OWS. An
    // opaque-tag may hold commas, so the list is walked tag by tag; what does
    // not parse is copied as it is.
    size_t pos = 0;
    while (pos < value.size()) {
        while (pos < value.size() && (value[pos] == ' ' || value[pos] == '\t'))
            storage.push_back(value[pos++]);
        if (value.substr(pos).starts_with("W/\"")) pos += 2; // §8.8.3: "W/" is case-sensitive
        if (pos < value.size() && value[pos] == '"') {
            size_t close = value.find('"', pos + 1);
            size_t end = close == std::string_view::npos ? value.size() : close + 1;
            storage.append(value.substr(pos, end - pos));
            pos = end;
        }
        size_t comma = value.find(',', pos);
        size_t end = comma == std::string_view::npos ? value.size() : comma + 1;
        storage.append(value.substr(pos, end - pos));
        pos = end;
    }
    return storage;
}

namespace {

class GzipCompressor final : public Compressor {
public:
    explicit GzipCompressor(int level) {
        ok_ = deflateInit2(&stream_, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    }
    ~GzipCompressor() override {
        if (ok_) deflateEnd(&stream_);
    }
    bool write(std::string_view data, bool flush, std::string& out) override {
        return run(data, flush ? Z_SYNC_FLUSH : Z_NO_FLUSH, out);
    }
    bool finish(std::string& out) override { return run({}, Z_FINISH, out); }

private:
    bool run(std::string_view data, int mode, std::string& out) {
        if (!ok_) return false;
        stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
        stream_.avail_in = uInt(data.size());
        for (;;) {
            size_t before = out.size();
            size_t room = deflateBound(&stream_, stream_.avail_in) + 64;
            out.resize(before + room);
            stream_.next_out = reinterpret_cast<Bytef*>(out.data() + before);
            stream_.avail_out = uInt(room);
            int result = deflate(&stream_, mode);
            out.resize(before + room - stream_.avail_out);
            if (result == Z_STREAM_ERROR) return false;
            if (mode == Z_FINISH ? result == Z_STREAM_END
                                 : stream_.avail_in == 0 && stream_.avail_out > 0)
                return true;
        }
    }
    z_stream stream_{};
    bool ok_ = false;
};

class BrotliCompressor final : public Compressor {
public:
    explicit BrotliCompressor(int quality)
        : state_(BrotliEncoderCreateInstance(nullptr, nullptr, nullptr)) {
        if (state_) {
            BrotliEncoderSetParameter(state_, BROTLI_PARAM_QUALITY, uint32_t(quality));
            BrotliEncoderSetParameter(state_, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
        }
    }
    ~BrotliCompressor() override {
        if (state_) BrotliEncoderDestroyInstance(state_);
    }
    bool write(std::string_view data, bool flush, std::string& out) override {
        return run(data, flush ? BROTLI_OPERATION_FLUSH : BROTLI_OPERATION_PROCESS, out);
    }
    bool finish(std::string& out) override { return run({}, BROTLI_OPERATION_FINISH, out); }

private:
    bool run(std::string_view data, BrotliEncoderOperation operation, std::string& out) {
        if (!state_) return false;
        size_t available_in = data.size();
        const auto* next_in = reinterpret_cast<const uint8_t*>(data.data());
        for (;;) {
            size_t available_out = 0;
            if (!BrotliEncoderCompressStream(state_, operation, &available_in, &next_in,
                                             &available_out, nullptr, nullptr))
                return false;
            size_t size = 0;
            const uint8_t* produced = BrotliEncoderTakeOutput(state_, &size);
            out.append(reinterpret_cast<const char*>(produced), size);
            bool done = available_in == 0 && !BrotliEncoderHasMoreOutput(state_) &&
                        (operation != BROTLI_OPERATION_FINISH || BrotliEncoderIsFinished(state_));
            if (done) return true;
        }
    }
    BrotliEncoderState* state_;
};

class ZstdCompressor final : public Compressor {
public:
    explicit ZstdCompressor(int level) : context_(ZSTD_createCCtx()) {
        if (context_) ZSTD_CCtx_setParameter(context_, ZSTD_c_compressionLevel, level);
    }
    ~ZstdCompressor() override { ZSTD_freeCCtx(context_); }
    bool write(std::string_view data, bool flush, std::string& out) override {
        return run(data, flush ? ZSTD_e_flush : ZSTD_e_continue, out);
    }
    bool finish(std::string& out) override { return run({}, ZSTD_e_end, out); }

private:
    bool run(std::string_view data, ZSTD_EndDirective directive, std::string& out) {
        if (!context_) return false;
        ZSTD_inBuffer in{data.data(), data.size(), 0};
        for (;;) {
            size_t before = out.size();
            size_t room = ZSTD_CStreamOutSize();
            out.resize(before + room);
            ZSTD_outBuffer output{out.data() + before, room, 0};
            size_t left = ZSTD_compressStream2(context_, &output, &in, directive);
            out.resize(before + output.pos);
            if (ZSTD_isError(left)) return false;
            bool done = directive == ZSTD_e_continue ? in.pos == in.size : left == 0;
            if (done) return true;
        }
    }
    ZSTD_CCtx* context_;
};

std::unique_ptr<Compressor> make_compressor(Coding coding, bool once) {
    switch (coding) {
    case Coding::Gzip:
        return std::make_unique<GzipCompressor>(once ? kGzipOnce : kGzipStream);
    case Coding::Brotli:
        return std::make_unique<BrotliCompressor>(once ? kBrotliOnce : kBrotliStream);
    case Coding::Zstd:
        return std::make_unique<ZstdCompressor>(once ? kZstdOnce : kZstdStream);
    case Coding::Identity:
        break;
    }
    return nullptr;
}

} // namespace

std::unique_ptr<Compressor> Compressor::make(Coding coding) {
    return make_compressor(coding, false);
}

std::string compress_once(Coding coding, std::string_view data) {
    std::string out;
    auto compressor = make_compressor(coding, true);
    if (!compressor || !compressor->write(data, false, out) || !compressor->finish(out)) return {};
    return out;
}

} // namespace lepus
