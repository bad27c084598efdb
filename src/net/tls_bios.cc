// The per-thread BIOs under TLS connections: see net/detail/tls_bios.h.
#include "net/detail/tls_bios.h"

#include <cerrno>
#include <sys/socket.h>

namespace lepus::detail {

// Plaintext gathered for one record, and file bytes read for one record:
// one per reactor thread, since a record is written before the next is made.
char* record_buffer() {
    alignas(64) static thread_local char buffer[TlsTransport::kRecordSize];
    return buffer;
}

// Records OpenSSL writes after the handshake, gathered for one send(): one
// per reactor thread. Every TlsTransport call that enters OpenSSL sends or
// moves what it gathered before it returns, so the buffer is always empty
// between calls and never holds another connection's bytes.
std::string& gathered() {
    static thread_local std::string buffer;
    return buffer;
}

namespace {

// The BIO under OpenSSL's writes after the handshake: it appends to
// gathered() and never blocks, so SSL_write never answers WANT_WRITE.
int gather_write(BIO*, const char* data, size_t length, size_t* written) {
    gathered().append(data, length);
    *written = length;
    return 1;
}

long gather_control(BIO*, int command, long, void*) {
    // A flush succeeds (the transport sends); every other question
    // (kTLS, pending bytes, EOF) has the answer "no".
    return command == BIO_CTRL_FLUSH ? 1 : 0;
}

int mark_initialised(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
}

// A BIO method of ours: no state in the BIO, `write` or `read` (one may be
// null) and `control`.
using BioWrite = int (*)(BIO*, const char*, size_t, size_t*);
using BioRead = int (*)(BIO*, char*, size_t, size_t*);
using BioControl = long (*)(BIO*, int, long, void*);
BIO_METHOD* make_bio_method(const char* name, BioWrite write, BioRead read, BioControl control) {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, name);
    if (write) BIO_meth_set_write_ex(made, write);
    if (read) BIO_meth_set_read_ex(made, read);
    BIO_meth_set_ctrl(made, control);
    BIO_meth_set_create(made, mark_initialised);
    return made;
}

// The one BIO of `method` on this thread (a `Kind` per method), freed when
// the thread ends. Such a BIO keeps no state of its own, so the thread's
// connections share it, each SSL holding a counted reference: an idle
// connection pays for no BIO (about 220-250 bytes with its lock) of its own.
template <typename Kind> BIO* thread_bio(BIO_METHOD* method) {
    struct Holder {
        BIO* bio = nullptr;
        ~Holder() { BIO_free(bio); }
    };
    static thread_local Holder holder;
    if (!holder.bio) holder.bio = BIO_new(method);
    return holder.bio;
}

} // namespace

// The gathering BIO: what it is given goes to gathered().
BIO* gathering_bio() {
    struct Gatherer;
    static BIO_METHOD* method =
        make_bio_method("lepus record gatherer", gather_write, nullptr, gather_control);
    return thread_bio<Gatherer>(method);
}

// The socket OpenSSL reads from after the handshake, for the transport this
// thread is working for now: set by every TlsTransport entry point that may
// call into OpenSSL (ReadingFrom), so that one reader BIO per reactor thread
// serves all its connections, as the gathering BIO does for writes.
SocketInUse& socket_in_use() {
    static thread_local SocketInUse current;
    return current;
}

namespace {

// recv(2) for OpenSSL: what its socket BIO does, plus a note of whether the
// read drained the socket (see note_socket_read) and of the EOF, which
// OpenSSL asks the BIO about afterwards (BIO_CTRL_EOF).
int read_socket(BIO* bio, char* data, size_t length, size_t* got) {
    BIO_clear_retry_flags(bio);
    SocketInUse& current = socket_in_use();
    if (!current.reads) {
        errno = EBADF; // no transport set it: a bug, reported as a broken connection
        return 0;
    }
    ssize_t n = 0;
    do {
        n = ::recv(current.fd, data, length, 0);
    } while (n < 0 && errno == EINTR);
    ++current.reads->calls;
    current.reads->drained = n <= 0 || size_t(n) < length;
    if (n > 0) {
        *got = size_t(n);
        return 1;
    }
    if (n == 0)
        current.reads->eof = true;
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
        BIO_set_retry_read(bio);
    return 0;
}

long reader_control(BIO*, int command, long, void* argument) {
    const SocketInUse& current = socket_in_use();
    switch (command) {
    case BIO_CTRL_EOF:
        return current.reads && current.reads->eof ? 1 : 0;
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_C_GET_FD: // BIO_get_fd: the answer, and in *argument when given
        if (argument) *static_cast<int*>(argument) = current.fd;
        return current.fd;
    default:
        return 0; // no kTLS, nothing pending in the BIO itself
    }
}

} // namespace

// The reader BIO, shared by the thread's connections after their handshakes
// (the per-connection socket BIO is then freed).
BIO* reader_bio() {
    struct Reader;
    static BIO_METHOD* method =
        make_bio_method("lepus socket reader", nullptr, read_socket, reader_control);
    return thread_bio<Reader>(method);
}

// OpenSSL calls this around every operation on the socket BIO; after a read
// it notes whether the read drained the socket: fewer bytes than asked (or
// none). read() then knows, without another recv that would only say EAGAIN,
// when the socket has nothing more.
long note_socket_read(BIO* bio, int operation, const char*, size_t length, int, long, int result,
                      size_t* processed) {
    if (operation == (BIO_CB_READ | BIO_CB_RETURN)) {
        auto* state = reinterpret_cast<TlsTransport::SocketReads*>(BIO_get_callback_arg(bio));
        ++state->calls;
        state->drained = result <= 0 || (processed && *processed < length);
    }
    return result;
}

} // namespace lepus::detail
