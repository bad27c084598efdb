// libFuzzer driver for the QUIC packet path (issue 39): datagrams fed to a
// real QuicEndpoint (net/quic_endpoint.h) as if its UDP socket had read them.
// That covers the header peek (ngtcp2_pkt_decode_version_cid), the routing
// by connection ID, ngtcp2_accept and the Retry-token check of a new
// client's Initial, and, once a connection exists, ngtcp2_conn_read_pkt on a
// real server connection (GnuTLS session, transport parameters, timers on a
// reactor's wheel), and what the endpoint sends back.
//
// Layout of an input: up to kMaxDatagrams records, each a byte whose low bit
// picks one of two client addresses (a second address exercises path
// validation, RFC 9000 §9), a 2-byte big-endian length, and that many bytes
// (fewer when the input ends). The seeds (test/fuzz/make_corpus.py) hold a
// real client Initial, alone, twice, and from both addresses, so a mutated
// packet can meet a connection that already exists: a later record with the
// client's first destination ID routes to it.
//
// The application on the streams is a null one: packets the fuzzer makes
// almost never decrypt past the Initial keys, and nghttp3's side has its
// own tests. No process-wide state survives an input but the reactor and the
// TLS credentials: each input gets a new endpoint, deleted at its end.
#include "net/balancer.h"
#include "net/quic_connection.h"
#include "net/quic_endpoint.h"
#include "net/quic_tls.h"
#include "net/reactor.h"

#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <memory>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using namespace lepus;

constexpr size_t kMaxDatagrams = 16;

class NullApplication final : public QuicApplication {
public:
    bool start() override { return true; }
    int64_t receive(int64_t, const uint8_t*, size_t size, bool) override { return int64_t(size); }
    int acknowledged(int64_t, uint64_t) override { return 0; }
    int stream_closed(int64_t, uint64_t) override { return 0; }
    int stream_reset(int64_t) override { return 0; }
    int stream_unblocked(int64_t) override { return 0; }
    void client_streams(uint64_t) override {}
    int64_t next_data(int64_t& id, bool& fin, QuicVec*, size_t) override {
        id = -1;
        fin = false;
        return 0;
    }
    void stream_blocked(int64_t) override {}
    void stream_write_shut(int64_t) override {}
    int written(int64_t, size_t) override { return 0; }
    void poll() override {}
    void shutdown() override {}
    bool idle() const override { return true; }
    uint64_t no_error_code() const override { return 0x100; } // H3_NO_ERROR
    void close() override {}
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "quic_packet_fuzz: %s\n", what);
    std::abort();
}

void write_file(const std::string& path, const gnutls_datum_t& datum) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(datum.data, 1, datum.size, f) != datum.size) die("cannot write PEM");
    std::fclose(f);
}

// A self-signed P-256 certificate for localhost, made with GnuTLS into a
// temporary directory (QuicTlsContext loads PEM files, as the server does).
TlsSettings make_certificate() {
    char folder[] = "/tmp/lepus-quic-fuzz-XXXXXX";
    if (!mkdtemp(folder)) die("mkdtemp");
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    gnutls_x509_privkey_init(&key);
    gnutls_x509_crt_init(&crt);
    if (gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0)
        die("key");
    gnutls_x509_crt_set_version(crt, 3);
    unsigned char serial = 1;
    gnutls_x509_crt_set_serial(crt, &serial, 1);
    gnutls_x509_crt_set_activation_time(crt, time(nullptr) - 3600);
    gnutls_x509_crt_set_expiration_time(crt, time(nullptr) + 86400);
    gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost", 9);
    gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9, GNUTLS_FSAN_SET);
    gnutls_x509_crt_set_key(crt, key);
    if (gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0) die("sign");
    gnutls_datum_t pem;
    TlsSettings settings;
    TlsCertificate files{std::string(folder) + "/cert.pem", std::string(folder) + "/key.pem"};
    if (gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &pem) < 0) die("export cert");
    write_file(files.cert_path, pem);
    gnutls_free(pem.data);
    if (gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &pem) < 0) die("export key");
    write_file(files.key_path, pem);
    gnutls_free(pem.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    settings.default_certificates.push_back(files);
    return settings;
}

SocketAddress loopback(uint16_t port) {
    SocketAddress address;
    sockaddr_in& in = address.storage.v4;
    std::memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in.sin_port = htons(port);
    address.length = sizeof in;
    return address;
}

struct World {
    ReactorLoad load;
    std::atomic<int64_t> live{0};
    Reactor reactor{ReactorOptions{}, load, live, nullptr, nullptr};
    QuicTlsContext tls;
    QuicGauges gauges;
    // Where the endpoint's answers go: a socket nobody reads (a full buffer
    // drops them, which the endpoint counts and QUIC tolerates).
    SocketAddress clients[2];
    int sinks[2] = {-1, -1};

    World() {
        std::string error;
        if (!reactor.init(error)) die(error.c_str());
        TlsSettings settings = make_certificate();
        if (!tls.load(settings, error)) die(error.c_str());
        std::remove(settings.default_certificates[0].cert_path.c_str());
        std::remove(settings.default_certificates[0].key_path.c_str());
        std::string folder = settings.default_certificates[0].key_path;
        rmdir(folder.substr(0, folder.rfind('/')).c_str());
        for (int i = 0; i < 2; ++i)
            sinks[i] = bound_socket(clients[i]);
    }

    static int bound_socket(SocketAddress& address) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        address = loopback(0);
        if (fd < 0 || bind(fd, &address.storage.any, address.length) != 0 ||
            getsockname(fd, &address.storage.any, &address.length) != 0)
            die("cannot bind a UDP socket on 127.0.0.1");
        return fd;
    }

    // The endpoint's own socket, bound like a quic:// listener's.
    UniqueFd endpoint_socket() {
        SocketAddress bound;
        return UniqueFd(bound_socket(bound));
    }
};

World& world() {
    static World* instance = new World(); // lives as long as the process
    return *instance;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    world();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    World& w = world();
    auto endpoint = std::make_unique<QuicEndpoint>(
        w.reactor, w.endpoint_socket(), w.tls,
        [](QuicConnection&) -> std::unique_ptr<QuicApplication> {
            return std::make_unique<NullApplication>();
        },
        w.gauges);
    endpoint->set_siblings({endpoint.get()});
    size_t at = 0;
    for (size_t n = 0; n < kMaxDatagrams && at + 3 <= size; ++n) {
        const SocketAddress& peer = w.clients[data[at] & 1];
        size_t length = size_t(data[at + 1]) << 8 | data[at + 2];
        at += 3;
        length = std::min(length, size - at);
        // An exact-size heap copy, so that ASan sees a read past the datagram.
        auto datagram = std::make_unique<uint8_t[]>(length ? length : 1);
        if (length) std::memcpy(datagram.get(), data + at, length);
        endpoint->feed(peer, datagram.get(), length);
        at += length;
    }
    endpoint.reset(); // closes what is left (CONNECTION_CLOSE), frees every connection
    return 0;
}
