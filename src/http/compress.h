// Compression of responses (issue 18): which content coding a client gets
// (Accept-Encoding with q-values, RFC 9110 §12.5.3), which media types are
// worth compressing, and the three coders: gzip (zlib), br (Brotli) and zstd
// (Zstandard), all from Debian's libraries.
//
// Static files are compressed once per coding and kept in the file cache
// (StaticHandler); streamed responses (PHP) go through a Compressor that
// flushes at each burst, so a slow page still shows progress.
// Levels, measured in docs/BENCHMARKS.md ("Compression levels"): compressed
// once, gzip 6, br 6, zstd 12; on the fly, gzip 1 (nginx's gzip_comp_level),
// br 4, zstd 3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace lepus {

enum class Coding : uint8_t { Identity, Gzip, Brotli, Zstd };

// "gzip", "br", "zstd" ("" for identity): the Content-Encoding value.
std::string_view coding_name(Coding coding);

// The codings lepus may offer for one response.
struct CodingSet {
    bool gzip = false, brotli = false, zstd = false;
    bool has(Coding coding) const;
};

struct Negotiated {
    Coding coding = Coding::Identity;
    bool acceptable = true; // false: nothing offered is acceptable, not even identity (406)
};

// Picks the coding for `accept_encoding` among `offered` (identity always
// offered): the highest q-value above 0; on a tie br, then zstd, then gzip,
// then identity. No header: identity. "*" stands for every coding the header
// does not name; "identity;q=0" (or "*;q=0" without identity) refuses identity.
Negotiated negotiate_coding(std::string_view accept_encoding, CodingSet offered);

// Whether a Content-Type is worth compressing: text/*, JavaScript, JSON, XML,
// SVG, WebAssembly and the like (nginx's gzip_types, widened to what sites serve).
// Images, video, archives and fonts other than ttf/otf are compressed already.
bool is_compressible_type(std::string_view content_type);

// Below this many bytes compression saves too little to pay for its headers
// and a round of the coder (nginx's gzip_min_length is 20; 256 as in caddy):
// gzip's frame alone is 18 bytes, and what a short text saves stays well
// inside the one TCP segment it fits in anyway. A constant, not a flag: no
// site has asked to tune it.
inline constexpr size_t kMinCompressLength = 256;

// An If-None-Match value as a backend should see it: each weak entity-tag
// W/"x" in its strong form "x" (the rest as it is). Compressing a backend's
// response weakens its ETag (RFC 9110 §8.8.1), and clients send back that
// weak form; a script comparing If-None-Match with its own "x" as a string
// (WordPress's feed) would never answer 304. If-None-Match uses the weak
// comparison (§13.1.2), for which W/"x" and "x" match alike, so the
// restored form asks the same question. (Not for If-Match: its comparison is
// strong.) Returns `value` itself when it has no weak tag, else a view of
// `storage`.
std::string_view strong_form_of_etags(std::string_view value, std::string& storage);

// One-shot compression of a whole body at the levels for compressing once.
// Empty on failure (the caller then serves identity).
std::string compress_once(Coding coding, std::string_view data);

// Streaming compression at the on-the-fly levels.
class Compressor {
public:
    static std::unique_ptr<Compressor> make(Coding coding);
    virtual ~Compressor() = default;
    // Appends the compressed form of `data` to `out`; with `flush`, everything
    // given so far becomes decodable from what `out` holds (a sync flush).
    virtual bool write(std::string_view data, bool flush, std::string& out) = 0;
    // Ends the stream (trailer included).
    virtual bool finish(std::string& out) = 0;
};

} // namespace lepus
