// RouteState: what the router keeps for one exchange between its calls, owned
// by the router (Exchange::route points to it from start() to finish()). The
// engines never look inside: src/http only forward-declares it.
//
// It replaces a void* site and a shared_ptr<void> cast back where they were
// used: the site and the serving set that keeps it alive are typed here, and
// so is where a routing that had to wait (a password the verifier is still
// checking) goes on.
#pragma once

#include "http/response_head.h"
#include "server/client_table.h"

#include <cstdint>
#include <memory>
#include <string>

namespace lepus {

struct AuthRule;
struct LocationHandlers;
struct ServingSet;
struct SiteHandlers;

struct RouteState {
    // The serving set the exchange started with, kept until finish() (a
    // SIGHUP may replace the worker's), and the site in it.
    std::shared_ptr<ServingSet> serving;
    SiteHandlers* site = nullptr;
    // The site's location for the request's path (Router::step_find_location),
    // whose own keys replace the site's; null: none, or the site has none.
    const LocationHandlers* location = nullptr;
    // The step that runs when a Pending routing goes on (Router::resume);
    // Router::kRedirectStep: a handler's internal redirect (X-Accel).
    uint8_t next_step = 0;
    // The rule whose password the verifier granted: a step that asks again
    // for it (the step itself, run again, or try_files' target) passes.
    const AuthRule* granted = nullptr;
    // The rate limit was applied (a delayed request resumed goes past it).
    bool rate_checked = false;
    // The request's count against conn_limit / --conn-limit, given back with the state.
    ClientSlot conn_slot;
    // For a handler's internal redirect (X-Accel-Redirect): the URI to serve
    // and the handler's header fields kept on that answer.
    std::string redirect_target;
    ResponseHead redirect_fields;
    // When the request went to a backend (FastCGI or HTTP): the access log's
    // $upstream_response_time; 0: none did.
    uint64_t upstream_started_ms = 0;

    // Back to a fresh state, keeping the strings' capacity.
    void reset() {
        serving.reset();
        site = nullptr;
        location = nullptr;
        next_step = 0;
        granted = nullptr;
        rate_checked = false;
        conn_slot.reset();
        redirect_target.clear();
        redirect_fields.clear();
        upstream_started_ms = 0;
    }
};

} // namespace lepus
