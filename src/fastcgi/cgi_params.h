// CGI meta-variables (RFC 3875 §4.1) for one HTTP request, written as a FastCGI
// PARAMS stream, plus the split of a request path into script and PATH_INFO.
//
// The set matches nginx's conf/fastcgi.conf (fastcgi_params + SCRIPT_FILENAME),
// which is what php-fpm is deployed with, so PHP code sees the same $_SERVER.
#pragma once

#include "fastcgi/protocol.h"
#include "http/request.h"
#include "net/socket.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lepus::fastcgi {

// A variable the configuration adds or overrides (nginx's fastcgi_param):
// --fastcgi-param NAME=VALUE, `fastcgi_params = { NAME = "VALUE" }`.
using CgiParam = std::pair<std::string, std::string>;

// What is wrong with a parameter name (letters, digits and '_'), or empty.
std::string cgi_param_name_error(std::string_view name);

// `params` with `overrides` applied in order: a name already there takes the
// new value, a new name is appended (a site's on top of the global ones).
void merge_cgi_params(std::vector<CgiParam>& params, std::span<const CgiParam> overrides);

// Everything the variables are made from. Views must outlive append_cgi_params().
struct CgiContext {
    const Request& request;
    std::string_view document_root;   // absolute, no trailing slash: DOCUMENT_ROOT
    std::string_view script_name;     // decoded, e.g. "/index.php": SCRIPT_NAME
    std::string_view path_info;       // decoded, "" or "/some/path": PATH_INFO
    std::string_view script_filename; // document_root + script_name: SCRIPT_FILENAME
    SocketAddress remote;             // REMOTE_ADDR, REMOTE_PORT
    SocketAddress local;              // SERVER_ADDR, SERVER_PORT
    std::string_view server_name;     // SERVER_NAME; empty: the Host without its port
    // CONTENT_LENGTH: the body length when known up front (for a chunked body only
    // once it has been buffered); nullopt sends an empty CONTENT_LENGTH as nginx does.
    std::optional<uint64_t> content_length;
    bool https = false; // HTTPS=on and REQUEST_SCHEME=https
    // With https, as Apache's mod_ssl names them: SSL_PROTOCOL ("TLSv1.3")
    // and SSL_CIPHER ("TLS_AES_128_GCM_SHA256"); left out when empty.
    std::string_view ssl_protocol = {};
    std::string_view ssl_cipher = {};
    // The user HTTP basic auth let in: REMOTE_USER, with AUTH_TYPE=Basic
    // (RFC 3875 §4.1.1, §4.1.11, as Apache sets them); left out when empty.
    std::string_view remote_user = {};
    // The configured parameters: each replaces the variable of its name that
    // lepus would send, or is added after them (before the HTTP_* headers).
    std::span<const CgiParam> extra_params = {};
};

// "lepus/0.1.0": SERVER_SOFTWARE.
std::string_view server_software();

// Adds every CGI variable of `context` and each request header as HTTP_* to
// `writer` (between its begin() and finish()). Headers that are not clean
// tokens of letters, digits and '-' are skipped, as is Proxy (httpoxy);
// repeated headers are joined (RFC 3875 §4.1.18). No allocation of its own:
// only the writer's buffer grows, until its capacity settles.
void append_cgi_params(ParamsWriter& writer, const CgiContext& context);

struct ScriptPath {
    std::string_view script_name; // up to and including the script's segment
    std::string_view path_info;   // the rest, starting with '/', or empty
};

// Splits a decoded request path at the FIRST segment ending in one of
// `extensions` (e.g. ".php"): "/index.php/a/b" -> {"/index.php", "/a/b"};
// "/uploads/evil.jpg/x.php" -> {"/uploads/evil.jpg/x.php", ""}. nullopt when no
// segment matches (not a script; a bare "/.php" segment never counts). The caller (phase 2) MUST
// then check that document_root + script_name is a regular file before sending anything to the
// FastCGI server, and answer 404 otherwise: that check, not this split, is what
// keeps "/uploads/evil.jpg/x.php" from ever executing evil.jpg (the old
// cgi.fix_pathinfo hole).
std::optional<ScriptPath> split_script_path(std::string_view path,
                                            std::span<const std::string_view> extensions);

} // namespace lepus::fastcgi
