#include "server/pid_file.h"

#include "base/unique_fd.h"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <string_view>
#include <unistd.h>

namespace lepus {
namespace {

// The process id a PID file holds ("1234\n"), or nullopt (with errno set
// when the file could not be read, 0 when it holds something else).
std::optional<pid_t> read_pid_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return std::nullopt;
    char text[32];
    ssize_t length = ::read(fd.get(), text, sizeof text);
    errno = 0;
    if (length <= 0) return std::nullopt;
    std::string_view digits(text, size_t(length));
    if (digits.back() == '\n') digits.remove_suffix(1);
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
    return pid;
}

// The command name of a process (/proc/PID/comm: its program's file name,
// cut to 15 bytes); empty when it cannot be read.
std::string command_name(const std::string& pid) {
    UniqueFd fd(::open(("/proc/" + pid + "/comm").c_str(), O_RDONLY | O_CLOEXEC));
    char text[64];
    ssize_t length = fd ? ::read(fd.get(), text, sizeof text) : -1;
    if (length <= 0) return {};
    std::string name(text, size_t(length));
    if (name.back() == '\n') name.pop_back();
    return name;
}

int fail(const std::string& line) {
    std::fprintf(stderr, "lepus: %s\n", line.c_str());
    return 1;
}

} // namespace

bool write_pid_file(const std::string& path, std::string& error) {
    // O_NOFOLLOW: root writes it, often in /run; a link planted there must not
    // redirect the write.
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    std::string text = std::to_string(getpid()) + "\n";
    if (!fd || ::write(fd.get(), text.data(), text.size()) != ssize_t(text.size())) {
        error = "pid file '" + path + "': " + strerror(errno);
        return false;
    }
    return true;
}

void remove_pid_file(const std::string& path) {
    if (read_pid_file(path) == getpid()) ::unlink(path.c_str());
}

int signal_for(const std::string& word) {
    if (word == "reload") return SIGHUP;
    if (word == "reopen") return SIGUSR1;
    if (word == "stop") return SIGTERM;
    if (word == "quit") return SIGQUIT;
    return 0;
}

int signal_running_server(const std::string& pid_file, const std::string& word) {
    std::optional<pid_t> pid = read_pid_file(pid_file);
    if (!pid && errno == ENOENT)
        return fail("no pid file '" + pid_file + "': is lepus running (with --pid-file)?");
    if (!pid && errno != 0)
        return fail("cannot read pid file '" + pid_file + "': " + strerror(errno));
    if (!pid) return fail("pid file '" + pid_file + "' holds no process id");
    std::string number = std::to_string(*pid);
    // A file left by a lepus that is gone names a process that has ended, or
    // one that reused its id: signalling that one could stop anything.
    if (::kill(*pid, 0) != 0 && errno == ESRCH)
        return fail("pid file '" + pid_file + "' is stale: no process " + number + " is running");
    std::string name = command_name(number);
    if (name != command_name("self"))
        return fail("pid file '" + pid_file + "' is stale: process " + number + " is " +
                    (name.empty() ? "unknown" : "'" + name + "'") + ", not lepus");
    if (::kill(*pid, signal_for(word)) != 0)
        return fail("cannot signal lepus (process " + number + "): " + strerror(errno));
    return 0;
}

} // namespace lepus
