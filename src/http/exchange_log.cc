#include "http/exchange_log.h"

#include "http/exchange.h"
#include "log/log_escape.h"

namespace lepus {

void append_exchange_context(const Exchange& exchange, std::string_view server,
                             std::string_view upstream, std::string& out) {
    std::string client; // format_host() replaces what its string holds
    exchange.client.format_host(client);
    out.append("client: ");
    out.append(client);
    // Always written, empty or not, as nginx does: fail2ban's filters expect it.
    out.append(", server: ");
    append_log_escaped(server, out);
    out.append(", request: \"");
    if (const Request* request = exchange.request) {
        append_log_escaped(request->method_text, out);
        out.push_back(' ');
        append_log_escaped(request->target, out);
        out.push_back(' ');
        out.append(protocol_name(*request));
    } else {
        append_log_escaped(exchange.request_line, out);
    }
    out.push_back('"');
    if (!upstream.empty()) {
        out.append(", upstream: \"");
        append_log_escaped(upstream, out);
        out.push_back('"');
    }
    if (exchange.request && !exchange.request->host.empty()) {
        out.append(", host: \"");
        append_log_escaped(exchange.request->host, out);
        out.push_back('"');
    }
}

} // namespace lepus
