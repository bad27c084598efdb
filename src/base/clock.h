// Time sources. Reactors read the clock once per loop iteration and pass the
// value around, so hot code never calls these directly per request.
#pragma once

#include <cstdint>
#include <ctime>

namespace lepus {

// Milliseconds on CLOCK_MONOTONIC: for deadlines and intervals.
inline uint64_t monotonic_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Seconds since the epoch on CLOCK_REALTIME_COARSE: for Date headers and logs.
inline time_t wall_seconds() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return ts.tv_sec;
}

} // namespace lepus
