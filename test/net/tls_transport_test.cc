// TlsTransport and build_tls_context over a real socketpair, with an OpenSSL
// client on the other end; the certificate is made here (a self-signed P-256).
#include "net/tls_context.h"
#include "net/tls_transport.h"
#include "support/self_signed.h"

#include <arpa/inet.h>
#include <cstdio>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <numeric>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

// A self-signed certificate and its key, written as PEM files in a temporary directory.
struct TestCertificate {
    std::string dir, cert, key;

    explicit TestCertificate(const char* common_name) {
        char pattern[] = "/tmp/lepus-tls-unit-XXXXXX";
        dir = mkdtemp(pattern);
        cert = dir + "/cert.pem";
        key = dir + "/key.pem";
        test::SelfSignedCertificate made(common_name);
        FILE* f = fopen(cert.c_str(), "w");
        PEM_write_X509(f, made.certificate());
        fclose(f);
        f = fopen(key.c_str(), "w");
        PEM_write_PrivateKey(f, made.key(), nullptr, nullptr, 0, nullptr, nullptr);
        fclose(f);
    }
    ~TestCertificate() {
        unlink(cert.c_str());
        unlink(key.c_str());
        rmdir(dir.c_str());
    }
};

class TlsTransportTest : public ::testing::Test {
protected:
    void SetUp() override { start(false); }

    // A server transport and an OpenSSL client on the two ends of a
    // socketpair, or of a TCP connection on 127.0.0.1 (kTLS needs TCP); with
    // `ktls`, the context asks OpenSSL for kTLS.
    void start(bool ktls) {
        std::string error;
        TlsSettings settings;
        settings.default_certificates.push_back({certificate_.cert, certificate_.key});
        settings.ktls = ktls;
        context_ = build_tls_context(settings, error);
        ASSERT_TRUE(context_) << error;
        int fds[2];
        if (ktls)
            tcp_pair(fds);
        else
            ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
        client_fd_ = UniqueFd(fds[0]);
        server_ =
            std::make_unique<TlsTransport>(UniqueFd(fds[1]), context_.get(), peer_, counters_);
        client_context_ = SSL_CTX_new(TLS_client_method());
        client_ = SSL_new(client_context_);
        SSL_set_fd(client_, client_fd_.get());
        SSL_set_connect_state(client_);
    }
    static void tcp_pair(int fds[2]) {
        UniqueFd listener(socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        auto* generic = reinterpret_cast<sockaddr*>(&address);
        ASSERT_EQ(bind(listener.get(), generic, length), 0);
        ASSERT_EQ(listen(listener.get(), 1), 0);
        ASSERT_EQ(getsockname(listener.get(), generic, &length), 0);
        fds[0] = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_EQ(connect(fds[0], generic, length), 0);
        fds[1] = accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK);
        ASSERT_GE(fds[1], 0);
        ASSERT_EQ(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
    }
    void TearDown() override {
        SSL_free(client_);
        SSL_CTX_free(client_context_);
    }

    // Runs client and server until the handshake is done on both ends.
    void handshake() {
        char byte;
        for (int round = 0; round < 100 && !(server_->handshake_done() && client_done_); ++round) {
            if (!client_done_) client_done_ = SSL_do_handshake(client_) == 1;
            ssize_t n = server_->read(&byte, 1);
            ASSERT_TRUE(n == kIoAgain || n == 1) << n;
        }
        ASSERT_TRUE(server_->handshake_done());
        ASSERT_TRUE(client_done_);
    }

    // Reads what the client can get now (the server wrote it already).
    std::string client_read_all(size_t expected) {
        std::string out;
        char buffer[65536];
        for (int round = 0; round < 10000 && out.size() < expected; ++round) {
            size_t n = 0;
            if (SSL_read_ex(client_, buffer, sizeof buffer, &n) == 1) out.append(buffer, n);
        }
        return out;
    }

    TestCertificate certificate_{"unit.test"};
    SslContextRef context_;
    SocketAddress peer_;
    TlsCounters counters_;
    UniqueFd client_fd_;
    std::unique_ptr<TlsTransport> server_;
    SSL_CTX* client_context_ = nullptr;
    SSL* client_ = nullptr;
    bool client_done_ = false;
};

TEST_F(TlsTransportTest, HandshakeThenShortReadMeansDrained) {
    std::string_view protocol, cipher;
    server_->publish_session_to(&protocol, &cipher);
    handshake();
    EXPECT_EQ(protocol, "TLSv1.3");
    EXPECT_EQ(cipher, server_->cipher());
    EXPECT_EQ(counters_.handshakes.load(), 1u);
    // Three records: read() must return all of them in one call.
    for (const char* part : {"GET / HTTP/1.1\r\n", "Host: x\r\n", "\r\n"})
        ASSERT_EQ(SSL_write(client_, part, int(strlen(part))), int(strlen(part)));
    char buffer[4096];
    ssize_t n = server_->read(buffer, sizeof buffer);
    ASSERT_EQ(n, 27);
    EXPECT_EQ(std::string(buffer, size_t(n)), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(server_->read(buffer, sizeof buffer), kIoAgain);
    EXPECT_EQ(server_->protocol(), "TLSv1.3");
    EXPECT_FALSE(server_->cipher().empty());
}

// Key updates both ways after the handshake (RFC 8446 §4.6.3): the reads go
// through the thread's reader BIO and the answer's KeyUpdate through the
// gathering BIO, and both ends keep talking under the new keys.
TEST_F(TlsTransportTest, KeyUpdatesBothWaysKeepTheConnectionGoing) {
    handshake();
    for (int round = 0; round < 2; ++round) {
        // The client updates its keys and asks the server to update its own;
        // both take effect with the next records.
        ASSERT_EQ(SSL_key_update(client_, SSL_KEY_UPDATE_REQUESTED), 1);
        ASSERT_EQ(SSL_write(client_, "ping", 4), 4);
        char buffer[64];
        ASSERT_EQ(server_->read(buffer, sizeof buffer), 4);
        EXPECT_EQ(std::string_view(buffer, 4), "ping");
        iovec piece{const_cast<char*>("pong"), 4};
        ASSERT_EQ(server_->writev(&piece, 1, false), 4);
        EXPECT_EQ(client_read_all(4), "pong");
    }
    EXPECT_EQ(SSL_get_key_update_type(client_), SSL_KEY_UPDATE_NONE);
}

// A request that came whole is one recv: the socket BIO saw a short read
// and OpenSSL holds nothing more, so read() does not ask again for EAGAIN.
TEST_F(TlsTransportTest, AWholeRequestCostsOneRecv) {
    handshake();
    const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(SSL_write(client_, request, int(sizeof request - 1)), int(sizeof request - 1));
    uint64_t before = server_->socket_reads();
    char buffer[4096];
    ASSERT_EQ(server_->read(buffer, sizeof buffer), ssize_t(sizeof request - 1));
    EXPECT_EQ(server_->socket_reads() - before, 1u);
    EXPECT_EQ(server_->read(buffer, sizeof buffer), kIoAgain);
}

TEST_F(TlsTransportTest, FullBufferLeavesTheRestForTheNextRead) {
    handshake();
    std::string body(1000, 'x');
    ASSERT_EQ(SSL_write(client_, body.data(), int(body.size())), int(body.size()));
    char buffer[600];
    EXPECT_EQ(server_->read(buffer, sizeof buffer), 600);
    EXPECT_EQ(server_->read(buffer, sizeof buffer), 400);
    EXPECT_EQ(server_->read(buffer, sizeof buffer), kIoAgain);
}

TEST_F(TlsTransportTest, WritesThatMeetAFullSocketResumeWithTheSameBytes) {
    handshake();
    std::string head = "HTTP/1.1 200 OK\r\n\r\n";
    std::string body(3 << 20, '\0');
    for (size_t i = 0; i < body.size(); ++i)
        body[i] = char('a' + i % 26);
    std::string expected = head + body;
    std::string received;
    size_t sent = 0;
    int again = 0;
    while (sent < expected.size()) {
        // The engine's way: offer the head and the rest of the body each time.
        iovec iov[2];
        int count = 0;
        if (sent < head.size()) iov[count++] = {head.data() + sent, head.size() - sent};
        size_t body_from = sent > head.size() ? sent - head.size() : 0;
        iov[count++] = {body.data() + body_from, body.size() - body_from};
        ssize_t n = server_->writev(iov, count, false);
        if (n == kIoAgain) {
            ++again;
            received += client_read_all(1); // the client drains a little
            continue;
        }
        ASSERT_GT(n, 0);
        sent += size_t(n);
    }
    received += client_read_all(expected.size() - received.size());
    EXPECT_GT(again, 0) << "the socket buffer never filled: the test tested nothing";
    ASSERT_EQ(received.size(), expected.size());
    EXPECT_TRUE(received == expected);
}

TEST_F(TlsTransportTest, AHandshakeThatMeetsAFullSocketWantsWrite) {
    // A certificate "chain" of 40 copies makes the server's first flight
    // larger than the smallest send buffer the kernel allows.
    std::string chain = certificate_.dir + "/chain.pem";
    {
        FILE* in = fopen(certificate_.cert.c_str(), "r");
        std::string pem(4096, '\0');
        pem.resize(fread(pem.data(), 1, pem.size(), in));
        fclose(in);
        FILE* out = fopen(chain.c_str(), "w");
        for (int i = 0; i < 40; ++i)
            fwrite(pem.data(), 1, pem.size(), out);
        fclose(out);
    }
    std::string error;
    TlsSettings settings;
    settings.default_certificates.push_back({chain, certificate_.key});
    SslContextRef big = build_tls_context(settings, error);
    ASSERT_TRUE(big) << error;
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    int tiny = 1;
    setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny);
    UniqueFd client_fd(fds[0]);
    TlsTransport server(UniqueFd(fds[1]), big.get(), peer_, counters_);
    SSL* client = SSL_new(client_context_);
    SSL_set_fd(client, client_fd.get());
    SSL_set_connect_state(client);
    bool wanted_write = false, client_done = false;
    char byte;
    for (int round = 0; round < 1000 && !(server.handshake_done() && client_done); ++round) {
        // The client only reads when the server says it is stuck on writing,
        // as the reactor would only drive it on the EPOLLOUT edge.
        if (round == 0 || server.wants_write() || server.handshake_done())
            client_done = SSL_do_handshake(client) == 1 || client_done;
        ssize_t n = server.read(&byte, 1);
        ASSERT_TRUE(n == kIoAgain || n == 1) << n;
        wanted_write = wanted_write || server.wants_write();
        if (!server.wants_write() && !server.handshake_done())
            client_done = SSL_do_handshake(client) == 1 || client_done;
    }
    SSL_free(client);
    unlink(chain.c_str());
    EXPECT_TRUE(wanted_write) << "the send buffer never filled: the test tested nothing";
    EXPECT_TRUE(server.handshake_done());
    EXPECT_TRUE(client_done);
}

TEST_F(TlsTransportTest, EmptyPiecesWithoutABaseAreSkipped) {
    handshake();
    // The engine's head of a file response: the head, then an empty memory body.
    std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    iovec iov[3] = {{nullptr, 0}, {head.data(), head.size()}, {nullptr, 0}};
    ASSERT_EQ(server_->writev(iov, 3, true), ssize_t(head.size()));
    EXPECT_EQ(client_read_all(head.size()), head);
}

TEST_F(TlsTransportTest, SendFileGoesOutAsRecords) {
    handshake();
    std::string path = certificate_.dir + "/file.bin";
    std::string content(100000, '\0');
    for (size_t i = 0; i < content.size(); ++i)
        content[i] = char(i * 7);
    FILE* f = fopen(path.c_str(), "w");
    fwrite(content.data(), 1, content.size(), f);
    fclose(f);
    int file = open(path.c_str(), O_RDONLY);
    uint64_t offset = 10, left = content.size() - 10;
    std::string received;
    while (left > 0) {
        ssize_t n = server_->send_file(file, offset, left);
        if (n == kIoAgain) {
            received += client_read_all(1);
            continue;
        }
        ASSERT_GT(n, 0);
        offset += uint64_t(n);
        left -= uint64_t(n);
    }
    received += client_read_all(content.size() - 10 - received.size());
    close(file);
    unlink(path.c_str());
    EXPECT_TRUE(received == content.substr(10));
}

// The records of one write leave together: a 100 KiB response is seven full
// records and twelve small ones, and goes out in two send() calls (64 KiB
// of plaintext each at most), not one per record.
TEST_F(TlsTransportTest, RecordsOfOneWriteLeaveInBatches) {
    handshake();
    int size = 1 << 20; // room for the whole response on the client's side
    setsockopt(client_fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(server_->fd(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    uint64_t before = server_->record_sends();
    std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n";
    std::string body(102400, 'b');
    iovec iov[2] = {{head.data(), head.size()}, {body.data(), body.size()}};
    ASSERT_EQ(server_->writev(iov, 2, false), ssize_t(head.size() + body.size()));
    EXPECT_EQ(server_->record_sends() - before, 2u);
    EXPECT_FALSE(server_->wants_write());
    EXPECT_TRUE(client_read_all(head.size() + body.size()) == head + body);
}

// A file sent into a full socket: the records the socket refused wait in the
// transport, the bytes they carry are not reported as sent, and the same
// offset offered again gets them out first, exactly once.
TEST_F(TlsTransportTest, SendFileIntoAFullSocketResumesAtTheSameOffset) {
    handshake();
    int size = 4096;
    setsockopt(server_->fd(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    std::string path = certificate_.dir + "/big.bin";
    std::string content(2 << 20, '\0');
    for (size_t i = 0; i < content.size(); ++i)
        content[i] = char(i * 13 + i / 4096);
    FILE* f = fopen(path.c_str(), "w");
    fwrite(content.data(), 1, content.size(), f);
    fclose(f);
    int file = open(path.c_str(), O_RDONLY);
    uint64_t offset = 0;
    std::string received;
    int again = 0;
    while (offset < content.size()) {
        ssize_t n = server_->send_file(file, offset, content.size() - offset);
        if (n == kIoAgain) {
            ++again;
            // Held records carry our bytes: our own next write reports them,
            // and a read between (an EPOLLIN edge) neither sends them twice
            // nor loses them.
            EXPECT_FALSE(server_->wants_write());
            received += client_read_all(1);
            char byte;
            EXPECT_EQ(server_->read(&byte, 1), kIoAgain);
            continue;
        }
        ASSERT_GT(n, 0);
        offset += uint64_t(n);
    }
    received += client_read_all(content.size() - received.size());
    close(file);
    unlink(path.c_str());
    EXPECT_GT(again, 0) << "the socket buffer never filled: the test tested nothing";
    EXPECT_FALSE(server_->wants_write());
    EXPECT_TRUE(received == content);
}

TEST_F(TlsTransportTest, PlainHttpGetsA400) {
    const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(write(client_fd_.get(), request, sizeof request - 1), ssize_t(sizeof request - 1));
    char buffer[256];
    EXPECT_EQ(server_->read(buffer, sizeof buffer), kIoError);
    EXPECT_EQ(counters_.handshake_failures.load(), 1u);
    ssize_t n = ::read(client_fd_.get(), buffer, sizeof buffer);
    ASSERT_GT(n, 0);
    std::string answer(buffer, size_t(n));
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << answer;
    EXPECT_TRUE(answer.ends_with("The plain HTTP request was sent to HTTPS port\n")) << answer;
}

TEST_F(TlsTransportTest, CloseNotifyReadsAsTheEnd) {
    handshake();
    SSL_shutdown(client_);
    char buffer[64];
    EXPECT_EQ(server_->read(buffer, sizeof buffer), 0);
}

TEST_F(TlsTransportTest, TheFirstBytesGoOutInSmallRecords) {
    handshake();
    std::string body(40000, 'b');
    iovec iov[1] = {{body.data(), body.size()}};
    size_t written = 0;
    std::vector<size_t> records; // SSL_read returns one record's plaintext at most
    char buffer[65536];
    while (written < body.size() || records.empty() ||
           std::accumulate(records.begin(), records.end(), size_t{0}) < body.size()) {
        if (written < body.size()) {
            iov[0] = {body.data() + written, body.size() - written};
            ssize_t n = server_->writev(iov, 1, false);
            if (n > 0) written += size_t(n);
        }
        size_t n = 0;
        if (SSL_read_ex(client_, buffer, sizeof buffer, &n) == 1) records.push_back(n);
    }
    size_t offset = 0;
    for (size_t size : records) {
        if (offset < TlsTransport::kSmallRecordBytes) {
            EXPECT_LE(size, TlsTransport::kSmallRecordSize) << "at byte " << offset;
        }
        offset += size;
    }
    EXPECT_EQ(records.back(), 40000 - 12 * TlsTransport::kSmallRecordSize - 16384)
        << "after the small ones, full records";
}

TEST_F(TlsTransportTest, AnOrderlyCloseSendsCloseNotify) {
    handshake();
    server_->close();
    char buffer[64];
    size_t n = 0;
    EXPECT_EQ(SSL_read_ex(client_, buffer, sizeof buffer, &n), 0);
    EXPECT_EQ(SSL_get_error(client_, 0), SSL_ERROR_ZERO_RETURN) << "close_notify, not a bare EOF";
}

// After their handshakes the connections of one thread read through one
// shared reader BIO: each read must come from its own socket, and one
// connection's EOF must not end the other.
TEST_F(TlsTransportTest, ConnectionsOfOneThreadReadTheirOwnSockets) {
    handshake();
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    UniqueFd other_client_fd(fds[0]);
    TlsTransport other(UniqueFd(fds[1]), context_.get(), peer_, counters_);
    SSL* other_client = SSL_new(client_context_);
    SSL_set_fd(other_client, other_client_fd.get());
    SSL_set_connect_state(other_client);
    char byte;
    bool other_done = false;
    for (int round = 0; round < 100 && !(other.handshake_done() && other_done); ++round) {
        if (!other_done) other_done = SSL_do_handshake(other_client) == 1;
        ASSERT_TRUE(other.read(&byte, 1) == kIoAgain);
    }
    ASSERT_TRUE(other.handshake_done() && other_done);

    ASSERT_EQ(SSL_write(client_, "first", 5), 5);
    ASSERT_EQ(SSL_write(other_client, "second", 6), 6);
    char buffer[64];
    ASSERT_EQ(other.read(buffer, sizeof buffer), 6);
    EXPECT_EQ(std::string(buffer, 6), "second");
    ASSERT_EQ(server_->read(buffer, sizeof buffer), 5);
    EXPECT_EQ(std::string(buffer, 5), "first");
    // One client leaves without close_notify (a FIN: closing a socketpair
    // end with unread bytes would be a reset): its server sees the end, the
    // other connection goes on.
    SSL_free(other_client);
    ASSERT_EQ(shutdown(other_client_fd.get(), SHUT_WR), 0);
    EXPECT_EQ(other.read(buffer, sizeof buffer), 0);
    EXPECT_EQ(server_->read(buffer, sizeof buffer), kIoAgain);
    ASSERT_EQ(SSL_write(client_, "third", 5), 5);
    ASSERT_EQ(server_->read(buffer, sizeof buffer), 5);
    EXPECT_EQ(std::string(buffer, 5), "third");
}

// With kTLS asked for, over TCP: where the kernel has the `tls` module (and
// the cipher is one it knows) the kernel encrypts and files go out by
// SSL_sendfile; elsewhere (this project's CI) OpenSSL's attempt fails and the
// connection goes on with records made in user space. Either way a head
// written with writev and a file sent with send_file arrive whole, through
// a socket that fills up on the way.
class TlsOverTcpTest : public TlsTransportTest {
protected:
    void SetUp() override { start(true); }
};

TEST_F(TlsOverTcpTest, KtlsWhereTheKernelHasItRecordsElsewhere) {
    handshake();
    EXPECT_TRUE(kernel_offers_ktls() || !server_->ktls_send()) << "kTLS without the module";
    std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n";
    std::string content(1 << 20, '\0');
    for (size_t i = 0; i < content.size(); ++i)
        content[i] = char('a' + i % 23);
    std::string path = certificate_.dir + "/file";
    UniqueFd file(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600));
    ASSERT_EQ(write(file.get(), content.data(), content.size()), ssize_t(content.size()));
    std::string expected = head + content;
    std::string received;
    char buffer[65536];
    size_t head_sent = 0;
    uint64_t file_sent = 0;
    for (int round = 0; round < 100000 && received.size() < expected.size(); ++round) {
        if (head_sent < head.size()) {
            iovec piece{head.data() + head_sent, head.size() - head_sent};
            ssize_t n = server_->writev(&piece, 1, true);
            ASSERT_TRUE(n > 0 || n == kIoAgain) << n;
            if (n > 0) head_sent += size_t(n);
        } else if (file_sent < content.size()) {
            ssize_t n = server_->send_file(file.get(), file_sent, content.size() - file_sent);
            ASSERT_TRUE(n > 0 || n == kIoAgain) << n;
            if (n > 0) file_sent += uint64_t(n);
        }
        size_t n = 0;
        if (SSL_read_ex(client_, buffer, sizeof buffer, &n) == 1) received.append(buffer, n);
    }
    EXPECT_EQ(received.size(), expected.size());
    EXPECT_TRUE(received == expected);
    unlink(path.c_str());
}

TEST(TlsContext, KtlsProbeAgreesWithTheKernelsList) {
    // The probe loads the module where there is one, so afterwards the
    // kernel's list of upper-layer protocols names `tls` exactly when the
    // probe said yes.
    bool offered = kernel_offers_ktls();
    std::string available;
    if (FILE* list = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r")) {
        char line[256] = {};
        if (fgets(line, sizeof line, list)) available = line;
        fclose(list);
    }
    EXPECT_EQ(offered, (" " + available).find(" tls") != std::string::npos) << available;
    EXPECT_EQ(kernel_offers_ktls(), offered);
}

TEST(TlsContext, ProtocolsAndErrorsNameTheFile) {
    int low = 0, high = 0;
    EXPECT_TRUE(parse_tls_protocols("TLSv1.2 TLSv1.3", low, high));
    EXPECT_EQ(low, TLS1_2_VERSION);
    EXPECT_EQ(high, TLS1_3_VERSION);
    EXPECT_TRUE(parse_tls_protocols("TLSv1.3", low, high));
    EXPECT_EQ(low, TLS1_3_VERSION);
    EXPECT_FALSE(parse_tls_protocols("TLSv1.1 TLSv1.2", low, high));
    EXPECT_FALSE(parse_tls_protocols("", low, high));

    TestCertificate one("one.test"), two("two.test");
    std::string error;
    TlsSettings settings;
    settings.default_certificates.push_back({one.cert, two.key});
    EXPECT_FALSE(build_tls_context(settings, error));
    EXPECT_NE(error.find("does not match"), std::string::npos) << error;
    EXPECT_NE(error.find(two.key), std::string::npos) << error;

    settings.default_certificates = {{one.dir + "/none.pem", one.key}};
    EXPECT_FALSE(build_tls_context(settings, error));
    EXPECT_NE(error.find("none.pem"), std::string::npos) << error;

    settings.default_certificates = {{one.cert, one.key}};
    settings.sites.push_back({{"two.test"}, {{two.cert, one.key}}});
    EXPECT_FALSE(build_tls_context(settings, error)) << "a site's key is checked too";
    settings.sites.back().certificates = {{two.cert, two.key}};
    EXPECT_TRUE(build_tls_context(settings, error)) << error;
}

} // namespace
} // namespace lepus
