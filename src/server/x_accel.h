// X-Accel-Redirect and X-Sendfile: a script answers with a header naming a
// file and lepus serves the file itself (sendfile, ranges, conditional
// requests, the file cache), as nginx does for download sites: the script
// checks who may have the file, the server moves its bytes.
//
//   --x-accel PREFIX=DIR   (config `x_accel = "/protected/=/srv/files"`, top
//                           level and per site) names the internal folder:
//   X-Accel-Redirect: PREFIX/a/b.pdf   DIR/a/b.pdf, confined beneath DIR by
//                                      the site's symlink policy
//   X-Accel-Redirect: /public/c.zip    the site's own files (nginx's internal
//                                      redirect to a public location; always on)
//   X-Sendfile: DIR/a/b.pdf            the same file by its path (lighttpd,
//                                      Apache's mod_xsendfile); only with
//                                      --x-accel, and only beneath DIR
// A client asking for PREFIX/... itself gets 404 (nginx's `internal`).
//
// A target is checked before anything opens it (unsafe_x_accel_path): no
// ".." segment, no %-escape that decodes to a separator, no NUL or control
// byte, no backslash (nginx's "unsafe URI"); a refused target is a 502 with
// one error-log line, as is a target outside the site's files or the
// folder. The router then opens it beneath the folder (or the site's root)
// as it opens a request's path, asks for the site's basic auth on it as for
// a request, and never serves a path its scripts would run as a file.
//
// The file's response keeps the script's Content-Type, Content-Disposition,
// Set-Cookie, Cache-Control, Expires and Accept-Ranges, the header fields
// nginx carries over an X-Accel-Redirect; its status is the file's (200, 206,
// 304, 404 ...), and GET is used for the file whatever the script's method
// was (HEAD stays HEAD), as nginx does.
#pragma once

#include "http/exchange.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lepus {

struct XAccel {
    std::string prefix; // "/protected/": starts and ends with '/'
    std::string root;   // "/srv/files": absolute, normalised, no trailing '/'
};

// "PREFIX=DIR"; nullopt and one line in `error` when it is not that, or when
// DIR is not a folder.
std::optional<XAccel> parse_x_accel(std::string_view text, std::string& error);

// Why a script's target `path` (without its query) is refused, or nullptr
// when it is safe: an X-Accel-Redirect URI (`percent_encoded`: its
// %-escapes are decoded and checked too) or an X-Sendfile file name (a '%'
// is just a byte). Stricter than decode_path, which resolves ".." and %2F for
// a client's request: a script's answer has no reason to use them, and a
// ".." there is how a folder is escaped (issue 32).
const char* unsafe_x_accel_path(std::string_view path, bool percent_encoded);

// Whether a script's header field is kept on the file's response.
bool kept_on_x_accel(std::string_view header_name);

// Puts the script's kept fields into the file's response head: the head's
// own fields of the same names go (the script's Content-Type wins over the
// file's), then the kept ones are added, in their order.
void replace_fields(const ResponseHead& kept, ResponseHead& head);

// A backend's stream (a script's, or an HTTP backend's), watched for
// X-Accel-Redirect / X-Sendfile. When its head names a file, the stream
// reports Redirect after setting the route state's redirect_target (the
// file's URI) and redirect_fields (the kept fields): the engine hands the
// exchange back to the router's redirect(), which serves the file. A target
// it must refuse (X-Sendfile outside DIR, a relative URI, an unsafe path) is
// Failed with error_status() 502 and one line in the error log.
class XAccelStream final : public ResponseStream {
public:
    // `x_accel` null: the site has no internal folder (X-Sendfile passes through).
    XAccelStream(std::unique_ptr<ResponseStream> inner, Exchange& exchange, const XAccel* x_accel)
        : inner_(std::move(inner)), exchange_(exchange), x_accel_(x_accel) {}

    size_t offer_body(std::span<const char> data) override { return inner_->offer_body(data); }
    void end_body() override { inner_->end_body(); }
    StreamState poll() override;
    const StreamHead& head() const override { return inner_->head(); }
    std::span<const char> body() const override { return inner_->body(); }
    void consume(size_t bytes) override { inner_->consume(bytes); }
    bool ended() const override { return inner_->ended(); }
    int error_status() const override;
    std::span<const Header> error_fields() const override;
    void release() override { inner_->release(); }

private:
    enum class Verdict : uint8_t { Unchecked, PassThrough, Redirect, Refused };
    // Reads the head once: pass it on, redirect to a file, or refuse.
    Verdict check(const StreamHead& head);
    // X-Sendfile's path as a URI under the prefix; false when it is not beneath DIR.
    bool sendfile_uri(std::string_view path, std::string& uri) const;

    std::unique_ptr<ResponseStream> inner_;
    Exchange& exchange_;
    const XAccel* x_accel_;
    Verdict verdict_ = Verdict::Unchecked;
};

} // namespace lepus
