// Opening log files, before and after the privilege drop (issues 17 and 33).
//
// lepus started as root opens its logs as root and then runs as the service
// user. A rotation may leave a new file that user cannot open (logrotate's
// `create 0644 root root`, or a folder only root may write): nginx's master
// keeps root for exactly this. Here a forked helper keeps root and does one
// thing, the OpenSSH privilege-separation way: on request over a socketpair,
// it opens one of the log paths it was given at start and passes the
// descriptor back (SCM_RIGHTS). Nothing else runs with privileges.
#pragma once

#include "base/unique_fd.h"

#include <string>
#include <sys/types.h>
#include <vector>

namespace lepus {

// The user and group log files are given to (fchown) when opened from now on:
// the service user must be able to write them. A file that did not exist gets
// the group "adm" instead when that group exists, mode 0640, as Debian's
// rotated logs have (adm members read logs); an existing one changes owner
// only (nginx's reopen). -1 keeps the opener's. Set before the loggers start.
void set_log_file_owner(uid_t uid, gid_t gid);

// Opens `path` for appending (created when missing) and gives it to the log
// owner. An invalid fd and `error` set (errno) on failure.
UniqueFd open_log_file(const std::string& path, int& error);

// Forks the helper that keeps root and opens `paths` (and no other) for
// reopen_log_file(). Call as root, before the drop and before any thread that
// holds a lock the helper could need (it only opens, chowns and sends). False
// and one sentence in `error` when it cannot start.
bool start_log_file_opener(const std::vector<std::string>& paths, std::string& error);

// open_log_file() through the helper when it runs and knows `path`, else
// directly. Thread-safe.
UniqueFd reopen_log_file(const std::string& path, int& error);

} // namespace lepus
