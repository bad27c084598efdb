// OpenSSL's memory: each connection's SSL object in a slot of its own size.
//
// OpenSSL 3.0 allocates 7,608 bytes for every connection's SSL. tcmalloc
// serves that from its 8 KiB size class, so each TLS connection, busy or
// idle, holds 584 bytes it never uses: about 4% of an idle HTTP/2 connection
// (issue 38, docs/BENCHMARKS.md). install_tls_memory() gives OpenSSL
// allocation functions (CRYPTO_set_mem_functions) that, once
// size_tls_memory() has learned the size of an SSL, put the requests of
// that class's range up to it in a SlotArena of slots of exactly that size,
// and pass everything else to malloc as before (a connection's record
// buffers included, so the per-request path is the same).
#pragma once

#include <cstddef>
#include <openssl/ssl.h>

namespace lepus {

// Installs the functions; call it before anything uses OpenSSL (the first line
// of main). It allocates nothing and does not start OpenSSL. Returns false,
// changing nothing, when OpenSSL has allocated already or in a sanitizer build
// (their leak checks cannot see into the arena); true also when installed
// before.
bool install_tls_memory();

// Makes the arena for SSLs the size of one made from `context` (the first TLS
// context built; a server without TLS reserves nothing). Later calls, and
// calls without install_tls_memory(), do nothing.
void size_tls_memory(SSL_CTX* context);

// The arena's slot size, or 0 before size_tls_memory() made it.
size_t tls_memory_slot_size();
// The slots in use: about one per TLS connection (for the tests).
size_t tls_memory_slots_in_use();

} // namespace lepus
