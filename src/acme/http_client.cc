#include "acme/http_client.h"

#include <curl/curl.h>
#include <mutex>

namespace lepus::acme {
namespace {

size_t append_body(char* data, size_t size, size_t count, void* response) {
    static_cast<HttpResponse*>(response)->body.append(data, size * count);
    return size * count;
}

size_t append_header(char* data, size_t size, size_t count, void* response) {
    std::string line(data, size * count);
    size_t colon = line.find(':');
    if (colon == std::string::npos) return size * count; // the status line, the blank line
    std::string name = line.substr(0, colon);
    for (char& c : name)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    size_t start = line.find_first_not_of(" \t", colon + 1);
    size_t end = line.find_last_not_of(" \t\r\n");
    static_cast<HttpResponse*>(response)->headers[name] =
        start == std::string::npos || end < start ? "" : line.substr(start, end - start + 1);
    return size * count;
}

int check_cancel(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return cancel && static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;
}

} // namespace

void init_http_client_library() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::HttpClient(std::string ca_root, const std::atomic<bool>* cancel)
    : ca_root_(std::move(ca_root)), cancel_(cancel) {
    curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
    if (curl_) curl_easy_cleanup(curl_);
}

HttpResponse HttpClient::get(const std::string& url) {
    return perform(url, "GET", nullptr);
}

HttpResponse HttpClient::head(const std::string& url) {
    return perform(url, "HEAD", nullptr);
}

HttpResponse HttpClient::post_jose(const std::string& url, const std::string& body) {
    return perform(url, "POST", &body);
}

HttpResponse HttpClient::perform(const std::string& url, const char* method,
                                 const std::string* body) {
    HttpResponse response;
    if (!curl_) {
        response.error = "cannot make a libcurl handle";
        return response;
    }
    CURL* curl = curl_;
    curl_easy_reset(curl); // keeps the connection cache
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); // another thread's timers are not ours
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "lepus-acme/1");
    if (cancel_) {
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, check_cancel);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(cancel_));
    }
    if (!ca_root_.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_root_.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
    curl_slist* headers = nullptr;
    if (body) {
        headers = curl_slist_append(headers, "Content-Type: application/jose+json");
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, long(body->size()));
    } else if (std::string_view(method) == "HEAD") {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    }
    if (headers) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (code != CURLE_OK) {
        response.status = 0;
        response.error = curl_easy_strerror(code);
        return response;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
}

} // namespace lepus::acme
