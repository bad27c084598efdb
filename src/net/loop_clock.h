// LoopClock: "now", read once per event-loop iteration (nginx's
// ngx_time_update; lwan does the same) and shared by everything that runs in that
// iteration, so that hot code never asks the kernel for the time per request.
// The reactor owns one; a unit test owns one and moves it by hand.
#pragma once

#include <cstdint>
#include <ctime>

namespace lepus {

struct LoopClock {
    uint64_t now_ms = 0; // CLOCK_MONOTONIC milliseconds: deadlines and intervals
    time_t now_s = 0;    // wall-clock seconds: Date headers and logs
};

} // namespace lepus
