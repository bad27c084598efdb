// HttpConnection: one client connection on one reactor, from accept to close.
//
// It reads until EAGAIN (a short read counts as EAGAIN: epoll signals the next
// arrival with a new edge), feeds the parser, hands complete requests to the
// static handler, and writes the response with sendmsg (head and in-memory
// body) and sendfile (file body), continuing across EAGAIN. Pipelined
// requests are answered in order. One wake-up serves at most kMaxRequestsPerPass
// requests or kMaxBytesPerPass bytes, then the connection re-queues itself so
// that the other connections of the reactor are not starved.
//
// One TimerEntry carries whichever timeout applies now: keepalive idle,
// the header deadline (armed once per request, never extended: the slowloris
// defence), body read, write stall, or the lingering close.
//
// Scripts (--fastcgi, or a [[site]]'s fastcgi) go to php-fpm through the
// site's UpstreamPool, in the serving set the request holds: the connection is
// the UpstreamClient of one backend connection, streams the request body to it
// as STDIN records and relays the response as it arrives
// (http_connection_fastcgi.cc), with bounded buffers both ways.
#pragma once

#include "base/unique_fd.h"
#include "fastcgi/upstream.h"
#include "net/reactor.h"
#include "net/timer_wheel.h"
#include "server/worker.h"

#include <cstdint>
#include <memory>

namespace lepus {

class HttpConnection final : public EventHandler, public fastcgi::UpstreamClient {
public:
    // Takes ownership of the socket and registers it with the worker's reactor;
    // the connection deletes itself when it closes.
    static void open(Worker& worker, const AcceptedSocket& socket);

    void on_events(uint32_t events) override;
    void on_shutdown() override;
    void on_force_close() override;
    void on_upstream_progress() override;

    static constexpr int kMaxRequestsPerPass = 16;
    static constexpr uint64_t kMaxBytesPerPass = 2u << 20; // as nginx's sendfile_max_chunk
    static constexpr size_t kMaxInput = 8192 + 32768 + 1024;
    // Response bytes queued for the client before the backend's body is left waiting.
    static constexpr size_t kProxyOutHighWater = 64 * 1024;

private:
    enum class Phase : uint8_t { Idle, ReadingHead, ReadingBody, Writing, Lingering, Upstream };
    enum class Step : uint8_t { Continue, Wait, Yield, Close };

    HttpConnection(Worker& worker, const AcceptedSocket& socket);
    ~HttpConnection() = default;

    // Moves to `next`, keeping the status page's reading/writing gauges right.
    void set_phase(Phase next);
    void drive();
    Step read_head();
    Step read_body();
    Step write_response();
    Step linger();
    Step fill_input();
    Step on_head_parsed();
    Step respond();
    // In http_connection_site.cc: virtual hosts and the status page.
    bool serve_redirect(const Request& request, const SiteConfig& site, Response& response);
    void add_site_headers(const SiteConfig& site, Response& response);
    void serve_status(const Request& request, Response& response);
    // The site's error_page for response.status, if any, replaces its body.
    void apply_site_error_page(const Request& request, Response& response);
    bool status_allowed() const;
    Step respond_error(int status);
    Step finish_response();
    void log_access(int status, uint64_t bytes);

    // FastCGI (fastcgi_proxy.cc).
    Step start_fastcgi();
    Step proxy();
    void send_fastcgi_request(fastcgi::UpstreamConnection& upstream);
    Step upload_body(fastcgi::UpstreamConnection& upstream);
    void build_proxy_head(const fastcgi::UpstreamConnection& upstream);
    bool relay_body(fastcgi::UpstreamConnection& upstream);
    Step write_proxy();
    Step upstream_failed(fastcgi::UpstreamFailure failure);
    Step respond_fastcgi_error(int status, std::string_view extra_headers = {});
    const Request& request_views();
    void wait_with_timer();
    void close();
    static void on_timer(TimerEntry& entry);

    Worker& worker_;
    Reactor& reactor_;
    UniqueFd fd_;
    SocketAddress peer_;
    OwnedTimerEntry<HttpConnection> timer_;
    uint64_t deadline_ = 0; // what timer_ stands for; the wheel may fire a little early
    std::unique_ptr<RequestState> state_;
    std::shared_ptr<ServingSet> serving_; // from the parsed head until the response is sent
    uint64_t requests_ = 0;
    uint64_t body_remaining_ = 0; // Content-Length bytes still to discard
    size_t head_size_ = 0;
    size_t head_sent_ = 0, body_sent_ = 0;
    uint64_t bytes_this_pass_ = 0;
    int requests_this_pass_ = 0;
    Phase phase_ = Phase::Idle;
    bool readable_ = true;     // data may be waiting (no EAGAIN seen since the last edge)
    bool peer_closed_ = false; // read returned 0
    bool rdhup_ = false;       // EPOLLRDHUP seen: keep reading until 0
    bool keep_alive_ = true;   // for the response in progress
    bool body_chunked_ = false;
    bool error_response_ = false;
    bool in_drive_ = false;
    bool closed_ = false;

    // FastCGI request in progress.
    bool fastcgi_ = false;           // routed to php-fpm, not yet logged
    bool head_moved_ = false;        // the input buffer moved: re-parse for the views
    bool upstream_progress_ = false; // poked while in drive(): run again
    bool request_sent_ = false;
    bool proxy_head_built_ = false;
    bool proxy_chunked_ = false;
    bool proxy_has_length_ = false;
    bool proxy_no_body_ = false;
    bool proxy_finished_ = false; // everything for the client is in proxy_out
    bool proxy_blocked_ = false;  // the client's socket said EAGAIN
    bool have_local_ = false;
    int proxy_status_ = 0;
    uint64_t proxy_remaining_ = 0; // Content-Length bytes still expected from php-fpm
    uint64_t proxy_head_size_ = 0;
    uint64_t proxy_bytes_sent_ = 0; // head and body, as written to the socket
    SocketAddress local_;           // SERVER_ADDR, read once per connection
};

} // namespace lepus
