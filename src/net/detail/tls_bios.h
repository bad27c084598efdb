// The BIOs under a TlsTransport after its handshake (internal to net/: only
// tls_transport.cc includes this). One gathering BIO and one reader BIO per
// reactor thread serve all of that thread's connections, so an idle connection
// pays for no BIO of its own; a transport names the socket the reader reads
// (ReadingFrom) around every call into OpenSSL.
#pragma once

#include "net/tls_transport.h"

#include <openssl/bio.h>
#include <string>
#include <utility>

namespace lepus::detail {

// Plaintext gathered for one record, and file bytes read for one record: one
// per reactor thread (a record is written before the next is made).
char* record_buffer();
// Records OpenSSL wrote since the last send, gathered for one send(); empty
// between TlsTransport calls.
std::string& gathered();
// The thread's BIO that appends what OpenSSL writes to gathered().
BIO* gathering_bio();
// The thread's BIO that reads the socket ReadingFrom names.
BIO* reader_bio();
// The socket BIO's callback during the handshake: notes whether a read
// drained the socket (its argument is the transport's SocketReads).
long note_socket_read(BIO* bio, int operation, const char*, size_t length, int, long, int result,
                      size_t* processed);

// The socket the reader BIO reads, for one TlsTransport call.
struct SocketInUse {
    int fd = -1;
    TlsTransport::SocketReads* reads = nullptr;
};
SocketInUse& socket_in_use();

// Makes a transport's socket the one the reader BIO reads, for one call.
class ReadingFrom {
public:
    ReadingFrom(int fd, TlsTransport::SocketReads& reads)
        : saved_(std::exchange(socket_in_use(), SocketInUse{fd, &reads})) {}
    ~ReadingFrom() { socket_in_use() = saved_; }
    ReadingFrom(const ReadingFrom&) = delete;
    ReadingFrom& operator=(const ReadingFrom&) = delete;

private:
    SocketInUse saved_;
};

} // namespace lepus::detail
