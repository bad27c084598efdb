// CGI meta-variables for FastCGI. See cgi_params.h; RFC 3875 and nginx's fastcgi.conf.
#include "fastcgi/cgi_params.h"

#include "base/ascii.h"
#include "http/compress.h"

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>

namespace lepus::fastcgi {

namespace {

// Only letters, digits and '-' map cleanly to HTTP_*: "X_Foo" and "X-Foo" would
// both become HTTP_X_FOO, letting a client spoof a header a proxy set (nginx drops
// names with '_' by default, underscores_in_headers off).
bool maps_cleanly(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name) {
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        if (!ok) return false;
    }
    return true;
}

bool skipped_header(std::string_view name) {
    // httpoxy (CVE-2016-5385): HTTP_PROXY would be taken for the proxy variable.
    // RFC 3875 §4.1.18: headers already given as CONTENT_TYPE/CONTENT_LENGTH may go.
    // HTTP_HOST is request.host, given apart (the host the request was routed
    // by, whether it came as Host, an absolute-form target or :authority).
    return ascii_iequals(name, "proxy") || ascii_iequals(name, "content-type") ||
           ascii_iequals(name, "content-length") || ascii_iequals(name, "host") ||
           !maps_cleanly(name);
}

// A host address as text into `buffer` (empty for an unset address). IPv4 by
// hand: glibc's inet_ntop goes through sprintf.
std::string_view format_address(const SocketAddress& address, char (&buffer)[INET6_ADDRSTRLEN]) {
    auto family = address.storage.any.sa_family;
    if (family == AF_INET) {
        auto* bytes = reinterpret_cast<const unsigned char*>(&address.storage.v4.sin_addr);
        char* p = buffer;
        for (int i = 0; i < 4; ++i) {
            if (i > 0) *p++ = '.';
            p = std::to_chars(p, buffer + sizeof buffer, bytes[i]).ptr;
        }
        return {buffer, static_cast<size_t>(p - buffer)};
    }
    if (family != AF_INET6 ||
        !inet_ntop(AF_INET6, &address.storage.v6.sin6_addr, buffer, sizeof buffer))
        return {};
    return buffer;
}

std::string_view format_port(const SocketAddress& address, char (&buffer)[8]) {
    auto family = address.storage.any.sa_family;
    if (family != AF_INET && family != AF_INET6) return {};
    auto result = std::to_chars(buffer, buffer + sizeof buffer, address.port());
    return {buffer, static_cast<size_t>(result.ptr - buffer)};
}

std::string_view host_without_port(std::string_view host) {
    if (!host.empty() && host.front() == '[') {
        size_t close = host.find(']');
        return close == std::string_view::npos ? host : host.substr(0, close + 1);
    }
    return host.substr(0, host.find(':'));
}

// One HTTP_* variable for the first header named like headers[index], its value
// joined with those of the later ones of the same name (RFC 3875 §4.1.18; cookies
// with "; " as RFC 6265 §5.4 writes them).
void append_header_param(ParamsWriter& writer, std::span<const Header> headers, size_t index) {
    const Header& first = headers[index];
    std::string_view separator = ascii_iequals(first.name, "cookie") ? "; " : ", ";
    size_t value_length = first.value.size();
    for (size_t k = index + 1; k < headers.size(); ++k)
        if (ascii_iequals(headers[k].name, first.name))
            value_length += separator.size() + headers[k].value.size();
    writer.add_lengths(5 + first.name.size(), value_length);
    std::string& out = writer.buffer();
    out.append("HTTP_");
    size_t name_at = out.size();
    out.append(first.name);
    for (size_t i = name_at; i < out.size(); ++i)
        out[i] = out[i] == '-' ? '_' : ascii_upper(out[i]);
    out.append(first.value);
    for (size_t k = index + 1; k < headers.size(); ++k) {
        if (!ascii_iequals(headers[k].name, first.name)) continue;
        out.append(separator);
        out.append(headers[k].value);
    }
}

// HTTP_IF_NONE_MATCH with weak entity-tags in their strong form, when there
// are any (see strong_form_of_etags); false when the value goes as it is.
bool append_strong_if_none_match(ParamsWriter& writer, std::span<const Header> headers,
                                 size_t index) {
    std::string joined;
    for (size_t k = index; k < headers.size(); ++k) {
        if (!ascii_iequals(headers[k].name, headers[index].name)) continue;
        if (!joined.empty()) joined.append(", ");
        joined.append(headers[k].value);
    }
    std::string storage;
    std::string_view strong = strong_form_of_etags(joined, storage);
    if (strong.data() == joined.data()) return false;
    writer.add("HTTP_IF_NONE_MATCH", strong);
    return true;
}

void append_headers(ParamsWriter& writer, std::span<const Header> headers) {
    for (size_t i = 0; i < headers.size(); ++i) {
        if (skipped_header(headers[i].name)) continue;
        bool repeated = false;
        for (size_t j = 0; j < i && !repeated; ++j)
            repeated = ascii_iequals(headers[j].name, headers[i].name);
        if (repeated) continue;
        if (ascii_iequals(headers[i].name, "if-none-match") &&
            append_strong_if_none_match(writer, headers, i))
            continue;
        append_header_param(writer, headers, i);
    }
}

// The writer, skipping the variables the configuration overrides (nginx
// would send both and leave php-fpm to keep the last; other FastCGI servers
// keep the first). Compiled twice: without configured parameters (the usual
// case) no variable pays for the check (callgrind: 190 instructions a request).
template <bool kOverrides> class ParamSink {
public:
    ParamSink(ParamsWriter& writer, std::span<const CgiParam> overrides)
        : writer_(writer), overrides_(overrides) {}

    void add(std::string_view name, std::string_view value) {
        if (!overridden(name)) writer_.add(name, value);
    }

    // A variable whose value is two views back to back, without a temporary string.
    void add_joined(std::string_view name, std::string_view a, std::string_view b,
                    std::string_view c = {}) {
        if (overridden(name)) return;
        writer_.add_lengths(name.size(), a.size() + b.size() + c.size());
        writer_.append_raw(name);
        writer_.append_raw(a);
        writer_.append_raw(b);
        writer_.append_raw(c);
    }

    void add_overrides() {
        for (const CgiParam& param : overrides_)
            writer_.add(param.first, param.second);
    }

private:
    bool overridden(std::string_view name) const {
        if constexpr (!kOverrides) return false;
        for (const CgiParam& param : overrides_)
            if (param.first == name) return true;
        return false;
    }

    ParamsWriter& writer_;
    std::span<const CgiParam> overrides_;
};

std::string_view server_software_text() {
    return "lepus/" LEPUS_VERSION;
}

template <bool kOverrides> void append_all_params(ParamsWriter& writer, const CgiContext& context) {
    const Request& request = context.request;
    ParamSink<kOverrides> out(writer, context.extra_params);
    out.add("SCRIPT_FILENAME", context.script_filename);
    out.add("QUERY_STRING", request.query);
    out.add("REQUEST_METHOD", request.method_text);
    out.add("CONTENT_TYPE", request.content_type);
    char length_text[24];
    std::string_view content_length;
    if (context.content_length) {
        auto result =
            std::to_chars(length_text, length_text + sizeof length_text, *context.content_length);
        content_length = {length_text, static_cast<size_t>(result.ptr - length_text)};
    }
    out.add("CONTENT_LENGTH", content_length);
    out.add("SCRIPT_NAME", context.script_name);
    // nginx's $request_uri: the target as sent (its path part for absolute-form).
    if (!request.target.empty() && request.target.front() == '/')
        out.add("REQUEST_URI", request.target);
    else
        out.add_joined("REQUEST_URI", request.path, request.query.empty() ? "" : "?",
                       request.query);
    out.add_joined("DOCUMENT_URI", context.script_name, context.path_info);
    out.add("DOCUMENT_ROOT", context.document_root);
    out.add("SERVER_PROTOCOL", protocol_name(request)); // "HTTP/2.0" as nginx
    out.add("REQUEST_SCHEME", context.https ? "https" : "http");
    if (context.https) {
        out.add("HTTPS", "on");
        if (!context.ssl_protocol.empty()) out.add("SSL_PROTOCOL", context.ssl_protocol);
        if (!context.ssl_cipher.empty()) out.add("SSL_CIPHER", context.ssl_cipher);
    }
    out.add("GATEWAY_INTERFACE", "CGI/1.1");
    out.add("SERVER_SOFTWARE", server_software_text());
    char address_text[INET6_ADDRSTRLEN];
    char port_text[8];
    out.add("REMOTE_ADDR", format_address(context.remote, address_text));
    out.add("REMOTE_PORT", format_port(context.remote, port_text));
    if (!context.remote_user.empty()) {
        out.add("AUTH_TYPE", "Basic");
        out.add("REMOTE_USER", context.remote_user);
    }
    out.add("SERVER_ADDR", format_address(context.local, address_text));
    out.add("SERVER_PORT", format_port(context.local, port_text));
    out.add("SERVER_NAME",
            context.server_name.empty() ? host_without_port(request.host) : context.server_name);
    // PHP built with --enable-force-cgi-redirect refuses to run without it.
    out.add("REDIRECT_STATUS", "200");
    if (!context.path_info.empty()) {
        // RFC 3875 §4.1.5-6: PATH_TRANSLATED only exists when PATH_INFO does.
        out.add("PATH_INFO", context.path_info);
        out.add_joined("PATH_TRANSLATED", context.document_root, context.path_info);
    }
    out.add_overrides();
    if (!request.host.empty()) out.add("HTTP_HOST", request.host);
    append_headers(writer, request.headers);
}

} // namespace

std::string_view server_software() {
    return server_software_text();
}

void append_cgi_params(ParamsWriter& writer, const CgiContext& context) {
    if (context.extra_params.empty())
        append_all_params<false>(writer, context);
    else
        append_all_params<true>(writer, context);
}

std::string cgi_param_name_error(std::string_view name) {
    bool clean = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    });
    if (clean) return {};
    return "FastCGI parameter name '" + std::string(name) + "': letters, digits and '_' only";
}

void merge_cgi_params(std::vector<CgiParam>& params, std::span<const CgiParam> overrides) {
    for (const CgiParam& param : overrides) {
        auto same = std::find_if(params.begin(), params.end(),
                                 [&](const CgiParam& p) { return p.first == param.first; });
        if (same != params.end())
            same->second = param.second;
        else
            params.push_back(param);
    }
}

std::optional<ScriptPath> split_script_path(std::string_view path,
                                            std::span<const std::string_view> extensions) {
    // The first segment that ends in an extension is the script (Apache and
    // lighttpd agree; nginx's greedy ^(.+\.php)(/.+)$ would take the last one).
    size_t segment_end = 0;
    while (segment_end < path.size()) {
        size_t slash = path.find('/', segment_end + 1);
        segment_end = slash == std::string_view::npos ? path.size() : slash;
        std::string_view candidate = path.substr(0, segment_end);
        for (std::string_view extension : extensions) {
            if (extension.empty() || !candidate.ends_with(extension)) continue;
            // The extension alone is no script name: "/a/.php" is a hidden file.
            if (candidate.size() - extension.size() == 0 ||
                candidate[candidate.size() - extension.size() - 1] == '/')
                continue;
            return ScriptPath{candidate, path.substr(segment_end)};
        }
    }
    return std::nullopt;
}

} // namespace lepus::fastcgi
