// Listen addresses with a scheme: "https://ADDR:PORT" is a TLS listener,
// "http://ADDR:PORT" or a bare "ADDR:PORT" a plain one, "quic://ADDR:PORT"
// HTTP/3 over QUIC on UDP, "h2c://ADDR:PORT" a plain one that speaks HTTP/2
// only, with prior knowledge (RFC 9113 §3.3: no HTTP/1.1 answer, as nginx's
// `listen 80 http2;`). The names of lepus --listen, fixed: outside checks use them.
#pragma once

#include <string_view>

namespace lepus {

struct ListenScheme {
    std::string_view address; // what parse_listen_address() takes
    bool tls = false;
    bool quic = false; // UDP; kept apart from the TCP listeners (ServerOptions::quic_listen)
    bool h2c = false;  // plain TCP whose connections must start with the HTTP/2 preface
};

inline ListenScheme split_listen_scheme(std::string_view text) {
    if (text.starts_with("https://")) return {text.substr(8), true};
    if (text.starts_with("quic://")) return {text.substr(7), true, true};
    if (text.starts_with("h2c://")) return {text.substr(6), false, false, true};
    if (text.starts_with("http://")) return {text.substr(7), false};
    return {text, false};
}

} // namespace lepus
