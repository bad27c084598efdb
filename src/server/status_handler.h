// The status page (--status-path): counters of every worker, as JSON or, with
// ?format=prometheus, as Prometheus text. A handler like the others: it fills
// the exchange's response and knows nothing of the protocol below.
#pragma once

#include "http/exchange.h"
#include "net/cidr.h"

#include <span>

namespace lepus {

class Worker;

// Answers `exchange` with the status page of every worker of `worker`'s
// server: 403 for a client outside `allow` (--status-allow), 405 for a method
// other than GET and HEAD.
void serve_status(Worker& worker, std::span<const Cidr> allow, Exchange& exchange);

} // namespace lepus
