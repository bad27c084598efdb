// The ACME client's HTTP: one libcurl easy handle (its connection kept
// alive between requests), used on the ACME thread only. Never on a reactor:
// every call blocks until the CA answers or the timeout passes.
#pragma once

#include <atomic>
#include <map>
#include <string>

using CURL = void; // as curl.h declares it, without including it here

namespace lepus::acme {

struct HttpResponse {
    long status = 0;                            // 0: no answer (see error)
    std::map<std::string, std::string> headers; // lower-case names, the last of each
    std::string body;
    std::string error; // curl's reason when status is 0
    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

class HttpClient {
public:
    // `ca_root`: a PEM file trusted instead of the system's roots (a private
    // or test CA); empty: the system's. A request in flight is given up
    // within a second of `cancel` becoming true (lepus stopping).
    HttpClient(std::string ca_root, const std::atomic<bool>* cancel = nullptr);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    HttpResponse get(const std::string& url);
    HttpResponse head(const std::string& url);
    // POST with Content-Type application/jose+json (RFC 8555 §6.2).
    HttpResponse post_jose(const std::string& url, const std::string& body);

private:
    HttpResponse perform(const std::string& url, const char* method, const std::string* body);

    std::string ca_root_;
    const std::atomic<bool>* cancel_;
    CURL* curl_ = nullptr;
};

// curl_global_init, once; call on the main thread before the ACME thread starts.
void init_http_client_library();

} // namespace lepus::acme
