// OpenSSL's memory: each connection's SSL object in a slot of its own size.
//
// OpenSSL 3.0 allocates 7,608 bytes for every connection's SSL. tcmalloc
// serves that from its 8 KiB size class, so each TLS connection, busy or
// idle, holds 584 bytes it never uses: about 4% of an idle HTTP/2 connection
// (issue 38, docs/BENCHMARKS.md). install_tls_memory() gives OpenSSL
// allocation functions (CRYPTO_set_mem_functions) that put the requests of
// that class's range, up to the size of an SSL, in a SlotArena of slots of
// exactly that size, and pass everything else to malloc as before (a
// connection's record buffers included, so the per-request path is the
// same).
#pragma once

#include <cstddef>

namespace lepus {

// Installs the functions; call it before anything uses OpenSSL (the first line
// of main). Returns false, changing nothing, when OpenSSL has allocated
// already or in a sanitizer build (their leak checks cannot see into the
// arena); true also when installed before.
bool install_tls_memory();

// The arena's slot size, or 0 when install_tls_memory() has not installed it.
size_t tls_memory_slot_size();
// The slots in use: about one per TLS connection (for the tests).
size_t tls_memory_slots_in_use();

} // namespace lepus
