#include "proxy/proxy_exchange.h"

#include "base/ascii.h"
#include "http/compress.h"
#include "http/exchange_log.h"
#include "log/error_log.h"

#include <algorithm>

namespace lepus::proxy {
namespace {

// Fields the proxy sets itself, or that describe the client's connection.
bool is_replaced(std::string_view name) {
    using namespace std::string_view_literals; // lengths known when compiled, no strlen
    for (std::string_view own : {"Host"sv, "Content-Length"sv, "Expect"sv, "X-Forwarded-For"sv,
                                 "X-Forwarded-Proto"sv, "X-Forwarded-Host"sv, "Forwarded"sv})
        if (ascii_iequals(name, own)) return true;
    return false;
}

bool listed(const std::vector<std::string_view>& tokens, std::string_view name) {
    return std::any_of(tokens.begin(), tokens.end(),
                       [name](std::string_view token) { return ascii_iequals(token, name); });
}

// RFC 7239 §4: a value that is not a token is a quoted-string.
void append_forwarded_value(std::string_view value, std::string& out) {
    bool token = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
    if (token) {
        out.append(value);
        return;
    }
    out.push_back('"');
    for (char c : value) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    out.push_back('"');
}

} // namespace

std::string_view requested_upgrade(const Request& request) {
    if (request.version_minor < 1) return {};
    std::string_view upgrade;
    std::vector<std::string_view> named;
    for (const Header& header : request.headers) {
        if (ascii_iequals(header.name, "Upgrade")) upgrade = header.value;
        if (ascii_iequals(header.name, "Connection")) split_tokens(header.value, named);
    }
    // h2c is HTTP/2's own upgrade (deprecated, RFC 9113 §3.1), between lepus
    // and the client: its HTTP2-Settings is hop-by-hop, so it cannot be passed on.
    if (ascii_iequals(upgrade, "h2c")) return {};
    return listed(named, "upgrade") ? upgrade : std::string_view();
}

void append_request_head(const Request& request, const ConnectionInfo& connection,
                         const SocketAddress& client_address, std::string_view host,
                         std::string& out) {
    // RFC 9112 §3.2: the origin form (an absolute-form target's path and query).
    out.append(request.method_text).push_back(' ');
    if (request.target.starts_with('/') || request.target == "*") {
        out.append(request.target);
    } else {
        out.append(request.path.empty() ? std::string_view("/") : request.path);
        if (!request.query.empty()) out.append("?").append(request.query);
    }
    out.append(" HTTP/1.1\r\nHost: ").append(host).append("\r\n");
    // RFC 9110 §7.6.1: the client's hop-by-hop fields, and those its
    // Connection names, stay here.
    std::vector<std::string_view> named;
    for (const Header& header : request.headers)
        if (ascii_iequals(header.name, "Connection")) split_tokens(header.value, named);
    std::string forwarded_for, forwarded;
    for (const Header& header : request.headers) {
        // Names with '_' are dropped, silently, as nginx (underscores_in_headers
        // off, its line logged at info only) and the FastCGI side do: backends
        // that read '_' as '-' (CGI-style stacks, Puma before 6.4.3,
        // CVE-2024-45614) would take "X_Forwarded_Proto" for the field lepus
        // sets, and "Content_Length" for the framing.
        if (header.name.find('_') != std::string_view::npos) continue;
        if (ascii_iequals(header.name, "X-Forwarded-For")) {
            forwarded_for.append(header.value).append(", ");
            continue;
        }
        if (ascii_iequals(header.name, "Forwarded")) {
            forwarded.append(header.value).append(", ");
            continue;
        }
        if (is_hop_by_hop(header.name) || is_replaced(header.name) || listed(named, header.name))
            continue;
        std::string strong; // If-None-Match: W/"x" as "x" (see strong_form_of_etags)
        std::string_view value = ascii_iequals(header.name, "If-None-Match")
                                     ? strong_form_of_etags(header.value, strong)
                                     : header.value;
        out.append(header.name).append(": ").append(value).append("\r\n");
    }
    std::string client;
    client_address.format_host(client);
    bool secure = connection.secure;
    // nginx's $proxy_add_x_forwarded_for: the client's list, then the client.
    out.append("X-Forwarded-For: ").append(forwarded_for).append(client).append("\r\n");
    out.append("X-Forwarded-Proto: ").append(secure ? "https" : "http").append("\r\n");
    if (!request.host.empty()) out.append("X-Forwarded-Host: ").append(request.host).append("\r\n");
    // RFC 7239 §5.2: an IPv6 address in brackets, quoted; "unknown" for a Unix socket client.
    out.append("Forwarded: ").append(forwarded).append("for=");
    if (client == "unix:")
        out.append("unknown");
    else if (client.find(':') != std::string::npos)
        out.append("\"[").append(client).append("]\"");
    else
        out.append(client);
    out.append(";proto=").append(secure ? "https" : "http");
    if (!request.host.empty()) {
        out.append(";host=");
        append_forwarded_value(request.host, out);
    }
    out.append("\r\n");
    // The one hop-by-hop exchange passed on: a protocol switch the client
    // asked for (WebSocket), which the backend may accept with a 101.
    if (std::string_view upgrade = requested_upgrade(request); !upgrade.empty())
        out.append("Upgrade: ").append(upgrade).append("\r\nConnection: upgrade\r\n");
    if (request.chunked) {
        out.append("Transfer-Encoding: chunked\r\n");
    } else if (request.content_length) {
        out.append("Content-Length: ").append(std::to_string(*request.content_length));
        out.append("\r\n");
    }
    out.append("\r\n");
}

ProxyExchange::ProxyExchange(BackendGroup& group, Exchange& exchange, const ProxyTarget& target)
    : BackendStream(group, exchange),
      host_(target.host.empty() ? exchange.request->host : target.host) {
    if (host_.empty()) {
        // HTTP/1.0 without Host: HTTP/1.1 to the backend needs one (RFC 9112 §3.2).
        const std::string& address = pool_->options().address.text;
        host_ = address.starts_with("unix:") ? "localhost" : address;
    }
    chunked_ = exchange.request->chunked;
    server_.assign(target.server);
    // The pool is read when a line is written: after a fail-over it names the new backend.
    log_context = {[](const void* self, std::string& out) {
                       const auto& proxy = *static_cast<const ProxyExchange*>(self);
                       append_exchange_context(proxy.exchange_, proxy.server_,
                                               proxy.pool_->options().address.text, out);
                   },
                   this};
}

size_t ProxyExchange::offer_body(std::span<const char> data) {
    auto* backend = static_cast<BackendConnection*>(connection());
    if (request_sent_ && backend && backend->failure() == BackendFailure::None &&
        backend->tunnel() && backend->ended())
        return data.size(); // the backend left the tunnel: nobody reads the client's bytes
    return BackendStream::offer_body(data);
}

// The engine drops the usual hop-by-hop fields; those the backend's
// Connection names are dropped here (RFC 9110 §7.6.1). A tunnel's Upgrade
// names the protocol switched to: it stays.
void ProxyExchange::take_head(upstream::Connection& connection) {
    auto& backend = static_cast<BackendConnection&>(connection);
    const ResponseHead& head = backend.head();
    headers_.clear();
    bool tunnel = backend.tunnel();
    for (const Header& header : head.headers())
        if (!head.named_in_connection(header.name) ||
            (tunnel && ascii_iequals(header.name, "Upgrade")))
            headers_.push_back(header);
    head_.status = head.status();
    head_.headers = headers_;
    head_.content_length = head.content_length();
    // A 101 the client asked for: the engine makes the connection a tunnel.
    head_.upgrade = tunnel;
}

void ProxyExchange::write_request(upstream::Connection& connection) {
    auto& backend = static_cast<BackendConnection&>(connection);
    const Request& request = *exchange_.request;
    bool replayable = upstream::is_idempotent(request.method);
    bool upgrade = wants_tunnel();
    if (resend_.empty()) {
        std::string head;
        append_request_head(request, *exchange_.connection, exchange_.client, host_, head);
        backend.begin_request(head, request.is_head(), replayable, upgrade, chunked_);
    } else {
        // What another backend could not send, already framed: a complete
        // one needs no last chunk.
        backend.begin_request(resend_, request.is_head(), replayable, upgrade,
                              chunked_ && !resend_complete_);
        std::string().swap(resend_);
    }
    if (resend_complete_ || body_ended_) backend.end_body();
}

bool ProxyExchange::wants_tunnel() const {
    return !requested_upgrade(*exchange_.request).empty();
}

} // namespace lepus::proxy
