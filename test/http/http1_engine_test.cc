// Http1Engine over a real socketpair, with no reactor, server or php-fpm: the
// test plays the client on one end, drives the engine by hand after each
// write, and moves the engine's clock itself to reach every timeout phase.
// The handler answers from memory; a "/stream" path gets a ResponseStream the
// test feeds by hand (a backend that answers when told to).
#include "http/http1_engine.h"

#include <cerrno>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

// A backend the test controls: what it received, and what it answers.
class TestStream final : public ResponseStream {
public:
    size_t offer_body(std::span<const char> data) override {
        size_t take = std::min(data.size(), room);
        received.append(data.data(), take);
        room -= take;
        return take;
    }
    void end_body() override { body_ended = true; }
    StreamState poll() override { return state; }
    const StreamHead& head() const override { return head_; }
    std::span<const char> body() const override { return {body_.data(), body_.size()}; }
    void consume(size_t bytes) override { body_.erase(0, bytes); }
    bool ended() const override { return ended_; }
    int error_status() const override { return 503; }
    std::span<const Header> error_fields() const override { return kRetryAfter; }
    void release() override {
        if (released_count) ++*released_count;
    }

    int* released_count = nullptr; // outlives the stream, which the engine deletes
    std::string received;
    size_t room = size_t(-1);
    bool body_ended = false;
    StreamState state = StreamState::Pending;
    StreamHead head_;
    std::string body_;
    bool ended_ = false;
};

class TestHandler final : public ExchangeHandler {
public:
    void start(Exchange& exchange) override {
        const Request& request = *exchange.request;
        if (request.path.starts_with("/stream") || request.path.starts_with("/backend")) {
            auto stream = std::make_unique<TestStream>();
            stream->released_count = &streams_released;
            last_stream = stream.get();
            exchange.stream = std::move(stream);
            // As the router does for request_buffering = false.
            exchange.body_holds_backend = request.path.starts_with("/backend");
            return;
        }
        Response& response = exchange.response;
        body = "hello " + std::string(request.path);
        begin_head(200, exchange.keep_alive, response);
        response.head.content_length = body.size();
        if (!request.is_head()) response.body = body;
    }
    void fail(Exchange& exchange, int status, const ResponseHead* extra) override {
        failures.push_back(status);
        ReplyContext context{exchange.keep_alive, false};
        build_error_response(status, context, exchange.response);
        if (extra) {
            extra->for_each([&](std::string_view name, std::string_view value) {
                exchange.response.head.add(name, value);
            });
        }
    }
    void redirect(Exchange& exchange) override {
        // No stream of these tests redirects; an answer that says so if one did.
        fail(exchange, 508, nullptr);
    }
    void account(Exchange& exchange, int status, uint64_t body_bytes) override {
        finished.push_back({status, body_bytes, exchange.request != nullptr});
    }
    void finish(Exchange&) override { ++ended; }

    struct Finished {
        int status;
        uint64_t bytes;
        bool had_request;
    };
    std::string body;
    std::vector<int> failures;
    std::vector<Finished> finished; // as accounted
    int ended = 0;
    TestStream* last_stream = nullptr; // valid until the engine ends its exchange
    int streams_released = 0;
};

class Listener final : public ExchangeListener {
public:
    void on_exchange_progress() override { ++calls; }
    int calls = 0;
};

class Http1EngineTest : public ::testing::Test {
protected:
    void SetUp() override {
        int fds[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
        client_ = fds[0];
        transport_ = std::make_unique<PlainTransport>(UniqueFd(fds[1]));
        options_.header_timeout_ms = 10000;
        options_.keepalive_timeout_ms = 75000;
        options_.body_timeout_ms = 20000;
        options_.send_timeout_ms = 30000;
        options_.max_body_size = 1000;
        clock_.now_ms = 1000000;
        clock_.now_s = 1700000000;
        make_engine();
    }
    void TearDown() override {
        engine_.reset();
        if (client_ >= 0) ::close(client_);
    }
    void make_engine() {
        info_ = std::make_unique<ConnectionInfo>(SocketAddress{}, transport_->fd());
        engine_ = std::make_unique<Http1Engine>(context_, *transport_, *info_, listener_);
    }

    // Writes `bytes` as the client, then runs the engine as the reactor would.
    Http1Engine::Next send(std::string_view bytes) {
        if (!bytes.empty()) {
            EXPECT_EQ(write(client_, bytes.data(), bytes.size()), ssize_t(bytes.size()));
        }
        engine_->on_readable();
        return engine_->drive();
    }
    // Everything the engine has written so far.
    std::string received() {
        std::string out;
        char buffer[65536];
        for (;;) {
            ssize_t n = read(client_, buffer, sizeof buffer);
            if (n <= 0) break;
            out.append(buffer, size_t(n));
        }
        return out;
    }
    bool peer_closed() {
        char byte;
        return recv(client_, &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
    }

    Http1Options options_;
    LoopClock clock_;
    TestHandler handler_;
    Listener listener_;
    Http1StatePool states_{options_};
    PhaseGauges gauges_;
    Http1Context context_{handler_, states_, clock_, options_, &gauges_};
    int client_ = -1;
    std::unique_ptr<PlainTransport> transport_;
    std::unique_ptr<ConnectionInfo> info_;
    std::unique_ptr<Http1Engine> engine_;
};

size_t count(std::string_view text, std::string_view what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1))
        ++n;
    return n;
}

TEST_F(Http1EngineTest, KeepaliveRequestsAreAnsweredInTurn) {
    EXPECT_EQ(send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), Http1Engine::Next::Wait);
    std::string first = received();
    EXPECT_TRUE(first.starts_with("HTTP/1.1 200 OK\r\n"));
    EXPECT_TRUE(first.ends_with("\r\n\r\nhello /a"));
    EXPECT_EQ(send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"), Http1Engine::Next::Wait);
    EXPECT_TRUE(received().ends_with("hello /b"));
    ASSERT_EQ(handler_.finished.size(), 2u);
    EXPECT_EQ(handler_.finished[1].status, 200);
    EXPECT_EQ(handler_.finished[1].bytes, 8u);
    EXPECT_EQ(engine_->requests(), 2u);
    EXPECT_FALSE(peer_closed());
}

TEST_F(Http1EngineTest, HeadArrivingOneByteAtATime) {
    std::string request = "GET /bytes HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
    for (size_t i = 0; i + 1 < request.size(); ++i) {
        EXPECT_EQ(send(request.substr(i, 1)), Http1Engine::Next::Wait) << i;
        EXPECT_EQ(received(), "") << i;
    }
    send(request.substr(request.size() - 1));
    EXPECT_TRUE(received().ends_with("hello /bytes"));
}

TEST_F(Http1EngineTest, PipelinedRequestsAnsweredInOrderThenClose) {
    send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
         "GET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::string out = received();
    size_t one = out.find("hello /1"), two = out.find("hello /2"), three = out.find("hello /3");
    ASSERT_NE(three, std::string::npos);
    EXPECT_LT(one, two);
    EXPECT_LT(two, three);
    EXPECT_NE(out.find("Connection: close"), std::string::npos);
    EXPECT_EQ(handler_.finished.size(), 3u);
}

TEST_F(Http1EngineTest, TooManyPipelinedRequestsYieldToOtherConnections) {
    std::string burst;
    for (int i = 0; i < Http1Engine::kMaxRequestsPerPass + 4; ++i)
        burst += "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
    EXPECT_EQ(send(burst), Http1Engine::Next::Yield);
    EXPECT_EQ(count(received(), "hello /p"), size_t(Http1Engine::kMaxRequestsPerPass));
    engine_->on_resume();
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Wait);
    EXPECT_EQ(count(received(), "hello /p"), 4u);
}

TEST_F(Http1EngineTest, ContinueIsSentOnlyWhenTheBodyIsAwaited) {
    send("POST /stream HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    EXPECT_EQ(received(), "HTTP/1.1 100 Continue\r\n\r\n");
    send("hello");
    ASSERT_NE(handler_.last_stream, nullptr);
    EXPECT_EQ(handler_.last_stream->received, "hello");
    EXPECT_TRUE(handler_.last_stream->body_ended);
}

TEST_F(Http1EngineTest, ContinueWaitsForRoomAndIsNeverCut) {
    // Fill the engine's direction of the socket, as a response the client has
    // not read yet would.
    std::string filler(4096, 'f');
    size_t filled = 0;
    for (;;) {
        ssize_t n = write(transport_->fd(), filler.data(), filler.size());
        if (n <= 0) break;
        filled += size_t(n);
    }
    ASSERT_EQ(errno, EAGAIN);
    send("POST /stream HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    EXPECT_TRUE(engine_->waits_for_write());
    // The client reads everything; the engine is woken by the write edge.
    std::string out = received();
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Wait);
    out += received();
    ASSERT_EQ(out.size(), filled + 25);
    EXPECT_EQ(out.substr(filled), "HTTP/1.1 100 Continue\r\n\r\n");
    EXPECT_FALSE(engine_->waits_for_write());
    send("hello");
    EXPECT_EQ(handler_.last_stream->received, "hello");
}

TEST_F(Http1EngineTest, NoContinueWhenTheBodyCameWithTheHead) {
    send("POST /stream HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
         "hello");
    EXPECT_EQ(received(), "");
    EXPECT_EQ(handler_.last_stream->received, "hello");
}

TEST_F(Http1EngineTest, ChunkedBodyIsDecodedIntoTheStream) {
    send("POST /stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n");
    EXPECT_EQ(handler_.last_stream->received, "hello");
    EXPECT_FALSE(handler_.last_stream->body_ended);
    send("6\r\n world\r\n0\r\n\r\n");
    EXPECT_EQ(handler_.last_stream->received, "hello world");
    EXPECT_TRUE(handler_.last_stream->body_ended);
}

TEST_F(Http1EngineTest, ChunkedBodyOfAStaticRequestIsDroppedAndTheNextRequestServed) {
    send("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string out = received();
    EXPECT_NE(out.find("hello /a"), std::string::npos);
    EXPECT_TRUE(out.ends_with("hello /next"));
}

TEST_F(Http1EngineTest, StreamBackPressureStopsTheBodyAndProgressResumesIt) {
    send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.room = 4;
    send("0123456789");
    EXPECT_EQ(stream.received, "0123");
    EXPECT_EQ(engine_->deadline(), 0u); // waiting on the stream, not on the client
    stream.room = 100;
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Wait);
    EXPECT_EQ(stream.received, "0123456789");
    EXPECT_TRUE(stream.body_ended);
}

TEST_F(Http1EngineTest, StreamWithoutLengthIsChunked) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    EXPECT_EQ(received(), "");
    stream.state = StreamState::Ready;
    stream.head_.status = 200;
    stream.body_ = "part one";
    engine_->drive();
    std::string out = received();
    EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
    EXPECT_TRUE(out.ends_with("\r\n\r\n8\r\npart one\r\n"));
    stream.body_ = "two";
    stream.ended_ = true;
    engine_->drive();
    EXPECT_EQ(received(), "3\r\ntwo\r\n0\r\n\r\n");
    ASSERT_EQ(handler_.finished.size(), 1u);
    EXPECT_EQ(handler_.finished[0].status, 200);
    EXPECT_EQ(handler_.streams_released, 1);
}

TEST_F(Http1EngineTest, StreamOfHttp10IsCloseDelimited) {
    send("GET /stream HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.state = StreamState::Ready;
    stream.body_ = "abc";
    engine_->drive();
    stream.ended_ = true;
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Close);
    std::string out = received();
    EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
    EXPECT_EQ(out.find("chunked"), std::string::npos);
    EXPECT_TRUE(out.ends_with("\r\n\r\nabc"));
}

TEST_F(Http1EngineTest, WholeStreamGetsAContentLength) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.state = StreamState::Ready;
    stream.head_.status = 201;
    stream.body_ = "done";
    stream.ended_ = true;
    engine_->drive();
    std::string out = received();
    EXPECT_TRUE(out.starts_with("HTTP/1.1 201 Created\r\n"));
    EXPECT_NE(out.find("Content-Length: 4\r\n"), std::string::npos);
    EXPECT_TRUE(out.ends_with("done"));
}

TEST_F(Http1EngineTest, StreamShortOfItsLengthBeforeTheHeadIs502) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.state = StreamState::Ready;
    stream.head_.content_length = 100;
    stream.body_ = "short";
    stream.ended_ = true;
    engine_->drive();
    EXPECT_TRUE(received().starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
    EXPECT_EQ(handler_.failures, std::vector<int>{502});
}

TEST_F(Http1EngineTest, InterimStatusFromTheStreamIs502) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.state = StreamState::Ready;
    stream.head_.status = 101;
    stream.body_ = "body";
    stream.ended_ = true;
    engine_->drive();
    std::string out = received();
    EXPECT_TRUE(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
    EXPECT_EQ(out.find("101"), std::string::npos);
    EXPECT_TRUE(out.ends_with("hello /after")); // no desync
}

TEST_F(Http1EngineTest, FailedStreamAnswersItsStatus) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    handler_.last_stream->state = StreamState::Failed;
    engine_->drive();
    std::string out = received();
    EXPECT_TRUE(out.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
    EXPECT_NE(out.find("Retry-After: 1\r\n"), std::string::npos);
}

TEST_F(Http1EngineTest, OversizedContentLengthIs413WithoutContinue) {
    EXPECT_EQ(send("POST /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5000\r\n\r\n"),
              Http1Engine::Next::Close);
    std::string out = received();
    EXPECT_TRUE(out.starts_with("HTTP/1.1 413 ")) << out;
    EXPECT_EQ(out.find("100 Continue"), std::string::npos);
}

TEST_F(Http1EngineTest, OversizedFirstChunkIs413BeforeContinue) {
    send("POST /stream HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
         "Transfer-Encoding: chunked\r\n\r\n30d40\r\n");
    std::string out = received();
    EXPECT_TRUE(out.starts_with("HTTP/1.1 413 ")) << out;
    EXPECT_EQ(out.find("100 Continue"), std::string::npos);
}

TEST_F(Http1EngineTest, ParserErrorIs400WithoutARequest) {
    EXPECT_EQ(send("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"),
              Http1Engine::Next::Wait); // lingering, then closed
    EXPECT_TRUE(received().starts_with("HTTP/1.1 400 "));
    ASSERT_EQ(handler_.finished.size(), 1u);
    EXPECT_FALSE(handler_.finished[0].had_request);
    EXPECT_TRUE(peer_closed()); // our FIN after the answer; lingering reads on
}

TEST_F(Http1EngineTest, FreshConnectionGetsTheHeaderTimeoutFromAccept) {
    EXPECT_EQ(send(""), Http1Engine::Next::Wait);
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.header_timeout_ms);
    EXPECT_TRUE(engine_->deadline_exact());
    clock_.now_ms += 5000;
    send("GET / HTTP/1.1\r\n"); // a first byte does not extend it
    EXPECT_EQ(engine_->deadline(), clock_.now_ms - 5000 + options_.header_timeout_ms);
    clock_.now_ms += 4999;
    EXPECT_EQ(engine_->on_deadline(), Http1Engine::Next::Wait);
    clock_.now_ms += 1;
    EXPECT_EQ(engine_->on_deadline(), Http1Engine::Next::Close);
}

TEST_F(Http1EngineTest, EveryPhaseHasItsTimeout) {
    send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    received();
    // Idle between requests: keepalive, lazily refreshed.
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.keepalive_timeout_ms);
    EXPECT_FALSE(engine_->deadline_exact());
    // A head in progress: the header timeout, total.
    clock_.now_ms += 100;
    send("GET /b HTTP/1.1\r\n");
    uint64_t head_deadline = clock_.now_ms + options_.header_timeout_ms;
    EXPECT_EQ(engine_->deadline(), head_deadline);
    clock_.now_ms += 100;
    send("Host: x\r\n");
    EXPECT_EQ(engine_->deadline(), head_deadline);
    // A body being read: the body timeout of inactivity.
    send("Content-Length: 4\r\n\r\nab");
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.body_timeout_ms);
    send("cd");
    EXPECT_TRUE(received().ends_with("hello /b"));
}

// A body that holds a backend connection must keep up min_body_rate over
// each body timeout interval: a byte every 5 s never meets the 20 s of
// silence, and is cut off at the first interval's end (408 in the log).
TEST_F(Http1EngineTest, TrickledBodyToABackendIsCutOffAtTheMinimumRate) {
    options_.max_body_size = 1 << 20;
    send("POST /backend HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    uint64_t interval_end = clock_.now_ms + options_.body_timeout_ms;
    EXPECT_EQ(engine_->deadline(), interval_end);
    for (int i = 0; i < 3; ++i) {
        clock_.now_ms += 5000;
        send("x");
        EXPECT_EQ(engine_->deadline(), interval_end); // not moved by a byte
    }
    clock_.now_ms = interval_end;
    EXPECT_EQ(engine_->on_deadline(), Http1Engine::Next::Close);
    engine_->close();
    ASSERT_EQ(handler_.finished.size(), 1u);
    EXPECT_EQ(handler_.finished[0].status, 408);
}

// Above the rate, each interval that ends starts the next; time in which the
// backend takes no body does not count.
TEST_F(Http1EngineTest, BodyToABackendAboveTheMinimumRateGoesOn) {
    options_.max_body_size = 1 << 20;
    uint64_t wanted = options_.min_body_rate * options_.body_timeout_ms / 1000;
    send("POST /backend HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    send(std::string(wanted, 'a'));
    clock_.now_ms = engine_->deadline();
    EXPECT_EQ(engine_->on_deadline(), Http1Engine::Next::Wait);
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.body_timeout_ms);
    // Half an interval waiting, then the backend is full for a long while.
    clock_.now_ms += options_.body_timeout_ms / 2;
    stream.room = 0;
    send("b");
    EXPECT_EQ(engine_->deadline(), 0u);
    clock_.now_ms += 10 * options_.body_timeout_ms;
    stream.room = size_t(-1);
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Wait);
    // The rest of the interval: half of it.
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.body_timeout_ms / 2);
    EXPECT_EQ(stream.received.size(), wanted + 1);
}

TEST_F(Http1EngineTest, SilenceOnABufferedBodyIsTheBodyTimeout) {
    options_.max_body_size = 1 << 20;
    send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    clock_.now_ms += 5000;
    send("x");
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.body_timeout_ms);
}

TEST_F(Http1EngineTest, SlowReaderGetsTheSendTimeout) {
    int small = 4096;
    setsockopt(transport_->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(client_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    handler_.body.clear();
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    TestStream& stream = *handler_.last_stream;
    stream.state = StreamState::Ready;
    stream.body_ = std::string(1 << 20, 'x');
    stream.ended_ = true;
    EXPECT_EQ(engine_->drive(), Http1Engine::Next::Wait);
    EXPECT_TRUE(engine_->waits_for_write());
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.send_timeout_ms);
    clock_.now_ms += options_.send_timeout_ms;
    EXPECT_EQ(engine_->on_deadline(), Http1Engine::Next::Close);
    engine_->close();
    ASSERT_EQ(handler_.finished.size(), 1u);
    EXPECT_EQ(handler_.finished[0].status, 200);
    EXPECT_LT(handler_.finished[0].bytes, uint64_t(1 << 20));
}

TEST_F(Http1EngineTest, PartialPipelinedHeadStartsItsHeaderDeadlineAtOnce) {
    send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nX: ");
    EXPECT_TRUE(received().ends_with("hello /a"));
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.header_timeout_ms);
    EXPECT_TRUE(engine_->deadline_exact());
}

TEST_F(Http1EngineTest, BadRequestLingersThenCloses) {
    send("GET /a HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n");
    EXPECT_TRUE(received().starts_with("HTTP/1.1 400 Bad Request\r\n"));
    EXPECT_EQ(engine_->deadline(), clock_.now_ms + options_.linger_ms);
    EXPECT_TRUE(peer_closed()); // our FIN is out; the engine drains what the client sends
    EXPECT_EQ(send("more junk"), Http1Engine::Next::Wait);
    ::shutdown(client_, SHUT_WR);
    EXPECT_EQ(send(""), Http1Engine::Next::Close);
}

TEST_F(Http1EngineTest, ClientLeavingMidStreamIsLogged499) {
    send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    engine_->close();
    ASSERT_EQ(handler_.finished.size(), 1u);
    EXPECT_EQ(handler_.finished[0].status, 499);
}

TEST_F(Http1EngineTest, GaugesFollowThePhases) {
    send("GET /a HTTP/1.1\r\n");
    EXPECT_EQ(gauges_.reading.load(), 1u);
    send("Host: x\r\n\r\n");
    EXPECT_EQ(gauges_.reading.load(), 0u);
    EXPECT_EQ(gauges_.writing.load(), 0u);
}

} // namespace
} // namespace lepus
