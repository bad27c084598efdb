// install_tls_memory (issue 38): OpenSSL's SSL objects in slots of their own
// size, everything else through malloc as before, a real handshake on top.
// ctest runs each test in a process of its own, so each installs first.
#include "net/tls_memory.h"
#include "support/self_signed.h"

#include <cstring>
#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <string>

namespace lepus {
namespace {

// In a test's body, not a helper: GTEST_SKIP() returns from the function it is in.
#define INSTALL_OR_SKIP()                                                                          \
    do {                                                                                           \
        if (!install_tls_memory())                                                                 \
            GTEST_SKIP() << "not installed (a sanitizer build, or OpenSSL ran)";                   \
    } while (false)

// A server context with a self-signed P-256 certificate made here, in memory.
SSL_CTX* server_context() {
    test::SelfSignedCertificate made("localhost");
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(context, made.certificate());
    SSL_CTX_use_PrivateKey(context, made.key());
    return context;
}

TEST(TlsMemory, EachSslTakesOneSlotUntilFreedAndAHandshakeWorks) {
    INSTALL_OR_SKIP();
    SSL_CTX* server_ctx = server_context();
    size_tls_memory(server_ctx); // as build_tls_context does
    ASSERT_GT(tls_memory_slot_size(), 7u * 1024) << "OpenSSL's SSL is no longer that big";
    SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
    const size_t before = tls_memory_slots_in_use();
    SSL* server = SSL_new(server_ctx);
    EXPECT_EQ(tls_memory_slots_in_use(), before + 1);
    SSL* client = SSL_new(client_ctx);
    EXPECT_EQ(tls_memory_slots_in_use(), before + 2);

    BIO* server_end = nullptr;
    BIO* client_end = nullptr;
    ASSERT_EQ(BIO_new_bio_pair(&server_end, 0, &client_end, 0), 1);
    SSL_set_bio(server, server_end, server_end);
    SSL_set_bio(client, client_end, client_end);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);
    bool done = false;
    for (int round = 0; round < 20 && !done; ++round) {
        const int c = SSL_do_handshake(client);
        const int s = SSL_do_handshake(server);
        done = c == 1 && s == 1;
    }
    ASSERT_TRUE(done);
    const std::string message(4000, 'x');
    std::string received;
    char buffer[4096];
    for (int record = 0; record < 5; ++record) { // five records, each read before the next
        ASSERT_EQ(SSL_write(client, message.data(), static_cast<int>(message.size())),
                  static_cast<int>(message.size()));
        int n = 0;
        while ((n = SSL_read(server, buffer, sizeof buffer)) > 0)
            received.append(buffer, size_t(n));
    }
    EXPECT_EQ(received.size(), 5 * message.size());
    received.resize(message.size());
    EXPECT_EQ(received, message);
    EXPECT_EQ(tls_memory_slots_in_use(), before + 2); // nothing else took a slot

    SSL_free(client);
    SSL_free(server);
    EXPECT_EQ(tls_memory_slots_in_use(), before);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(server_ctx);
}

TEST(TlsMemory, ASlotReallocatedStaysOrMovesWithItsBytes) {
    INSTALL_OR_SKIP();
    SSL_CTX* context = server_context();
    size_tls_memory(context);
    SSL_CTX_free(context);
    const size_t slot = tls_memory_slot_size();
    ASSERT_GT(slot, 7u * 1024);
    const size_t before = tls_memory_slots_in_use();
    auto* bytes = static_cast<char*>(OPENSSL_malloc(slot - 8));
    ASSERT_NE(bytes, nullptr);
    EXPECT_EQ(tls_memory_slots_in_use(), before + 1);
    for (size_t i = 0; i < slot - 8; ++i)
        bytes[i] = static_cast<char>(i * 7);
    EXPECT_EQ(OPENSSL_realloc(bytes, slot), bytes); // still fits: in place
    EXPECT_EQ(OPENSSL_realloc(bytes, 100), bytes);
    auto* moved = static_cast<char*>(OPENSSL_realloc(bytes, 3 * slot));
    ASSERT_NE(moved, nullptr);
    EXPECT_NE(moved, bytes);
    EXPECT_EQ(tls_memory_slots_in_use(), before); // the slot went back
    for (size_t i = 0; i < slot - 8; ++i)
        ASSERT_EQ(moved[i], static_cast<char>(i * 7)) << i;
    OPENSSL_free(moved);

    // Smaller and larger requests never take a slot.
    void* small = OPENSSL_malloc(7 * 1024);
    void* large = OPENSSL_malloc(slot + 16);
    EXPECT_EQ(tls_memory_slots_in_use(), before);
    OPENSSL_free(small);
    OPENSSL_free(large);
}

TEST(TlsMemory, RefusedOnceOpenSslHasAllocated) {
    if (tls_memory_slot_size() != 0) GTEST_SKIP() << "installed by an earlier test of this process";
    OPENSSL_free(OPENSSL_malloc(64));
    EXPECT_FALSE(install_tls_memory());
    EXPECT_EQ(tls_memory_slot_size(), 0u);
}

// A server without TLS starts no OpenSSL and reserves no arena.
TEST(TlsMemory, NothingIsReservedBeforeATlsContext) {
    if (tls_memory_slot_size() != 0) GTEST_SKIP() << "sized by an earlier test of this process";
    INSTALL_OR_SKIP();
    EXPECT_EQ(tls_memory_slot_size(), 0u);
    void* large = OPENSSL_malloc(7700); // served by malloc: there is no arena yet
    ASSERT_NE(large, nullptr);
    EXPECT_EQ(tls_memory_slots_in_use(), 0u);
    OPENSSL_free(large);
}

} // namespace
} // namespace lepus
