// systemd readiness notification (Type=notify): a datagram with "READY=1",
// "RELOADING=1" or "STOPPING=1" to the unix socket named by $NOTIFY_SOCKET,
// which is the whole of sd_notify(3)'s protocol, so lepus needs no libsystemd.
// Without $NOTIFY_SOCKET (not started by systemd) it does nothing.
#pragma once

#include <string_view>

namespace lepus {

// Sends `state` (newline-separated VAR=value lines); false when there is no
// $NOTIFY_SOCKET or the send failed.
bool notify_service_manager(std::string_view state);

} // namespace lepus
