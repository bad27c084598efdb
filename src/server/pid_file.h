// The PID file (--pid-file) and `lepus -s SIGNAL`, which signals the lepus it
// names, as `nginx -s`: the way to reach lepus without systemd (logrotate's
// postrotate, an init script).
#pragma once

#include <string>
#include <sys/types.h>

namespace lepus {

// Writes this process's id and a newline to `path` (mode 0644; replaced if
// there). False with one line in `error`.
bool write_pid_file(const std::string& path, std::string& error);

// Removes `path` if it still names this process (a newer lepus may have
// written its own since). Quiet when it cannot: a lepus that dropped root may
// not remove a file in /run, and `-s` then calls the file stale.
void remove_pid_file(const std::string& path);

// The signal of an `-s` word: reload (SIGHUP), reopen (SIGUSR1), stop
// (SIGTERM), quit (SIGQUIT); 0 for any other word.
int signal_for(const std::string& word);

// lepus -s WORD: sends the signal to the process the PID file names, once it
// checked that the process runs and is a lepus. Returns the exit code: 0, or
// 1 with one line on stderr (no file, a stale file, no permission).
int signal_running_server(const std::string& pid_file, const std::string& word);

} // namespace lepus
