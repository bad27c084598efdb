#include "log/log_file.h"

#include "log/error_log.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <mutex>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus {
namespace {

constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY;
constexpr mode_t kOpenMode = 0644;
constexpr mode_t kAdmMode = 0640;

std::atomic<uid_t> log_file_uid{uid_t(-1)};
std::atomic<gid_t> log_file_gid{gid_t(-1)};
std::atomic<gid_t> adm_gid{gid_t(-1)}; // looked up once, when the owner is set

// The helper's end, in the server; -1 without a helper. Requests are one at a
// time: a logger thread's request and its answer are never interleaved with another's.
int opener_socket = -1;
std::mutex opener_mutex;

// One message each way: the path, then the errno (0) with the descriptor attached.
struct Reply {
    int error = 0;
};
// The helper's answer for a path it was not given at start.
constexpr int kNotAtStart = -1;

bool send_fd_reply(int socket, int fd, int error) {
    Reply reply{error};
    iovec iov{&reply, sizeof reply};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
    }
    return ::sendmsg(socket, &message, MSG_NOSIGNAL) == ssize_t(sizeof reply);
}

// The helper's life: answer requests until the server closes its end (or dies).
[[noreturn]] void serve_opens(int socket, const std::vector<std::string>& paths) {
    char path[PATH_MAX + 1];
    for (;;) {
        ssize_t n = ::recv(socket, path, sizeof path - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) ::_exit(0);
        path[n] = '\0';
        int error = kNotAtStart; // only the paths configured at start, whatever is asked
        UniqueFd fd;
        if (std::find(paths.begin(), paths.end(), std::string_view(path, size_t(n))) != paths.end())
            fd = open_log_file(path, error);
        if (!send_fd_reply(socket, fd.get(), fd ? 0 : error)) ::_exit(0);
    }
}

} // namespace

void set_log_file_owner(uid_t uid, gid_t gid) {
    log_file_uid.store(uid);
    log_file_gid.store(gid);
    const group* adm = ::getgrnam("adm");
    adm_gid.store(adm ? adm->gr_gid : gid_t(-1));
}

UniqueFd open_log_file(const std::string& path, int& error) {
    uid_t uid = log_file_uid.load();
    gid_t gid = log_file_gid.load(), adm = adm_gid.load();
    bool created = true;
    // O_EXCL first: only a file this call creates gets the adm group and mode.
    UniqueFd fd(::open(path.c_str(), kOpenFlags | O_CREAT | O_EXCL,
                       adm != gid_t(-1) && uid != uid_t(-1) ? kAdmMode : kOpenMode));
    if (!fd && errno == EEXIST) {
        created = false;
        fd.reset(::open(path.c_str(), kOpenFlags));
    }
    if (!fd) {
        error = errno;
        return fd;
    }
    // As nginx's reopen: an existing file (logrotate's `create`) changes owner
    // only, its group (adm) and mode are the admin's.
    if (!created) gid = gid_t(-1);
    if (created && adm != gid_t(-1) && uid != uid_t(-1)) gid = adm;
    // Failing is not fatal: the file is open; a later reopen by the user may fail.
    if ((uid != uid_t(-1) || gid != gid_t(-1)) && ::fchown(fd.get(), uid, gid) != 0) {
        std::string line;
        append_error_line(LogLevel::Error,
                          "fchown() log file \"" + path + "\" failed (" + std::to_string(errno) +
                              ": " + strerror(errno) + ")",
                          line);
        [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
    }
    return fd;
}

bool start_log_file_opener(const std::vector<std::string>& paths, std::string& error) {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
        error = std::string("cannot start the log opener: socketpair: ") + strerror(errno);
        return false;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("cannot start the log opener: fork: ") + strerror(errno);
        ::close(ends[0]);
        ::close(ends[1]);
        return false;
    }
    if (pid == 0) {
        // The helper holds nothing of the server's: no listener, key or
        // connection, only its socket (and stderr); it dies with the server.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::prctl(PR_SET_NAME, "lepus-logs");
        if (::getppid() == 1) ::_exit(0); // the server is already gone
        ::dup2(ends[1], 3);
        ::close_range(4, ~0U, 0);
        int null = ::open("/dev/null", O_RDWR);
        if (null >= 0) {
            ::dup2(null, STDIN_FILENO);
            ::dup2(null, STDOUT_FILENO);
            if (null > STDERR_FILENO && null != 3) ::close(null);
        }
        serve_opens(3, paths);
    }
    ::close(ends[1]);
    opener_socket = ends[0];
    return true;
}

UniqueFd reopen_log_file(const std::string& path, int& error) {
    std::lock_guard lock(opener_mutex);
    if (opener_socket < 0) return open_log_file(path, error);
    if (::send(opener_socket, path.data(), path.size(), MSG_NOSIGNAL) != ssize_t(path.size())) {
        return open_log_file(path, error); // the helper is gone: try as we are
    }
    Reply reply;
    iovec iov{&reply, sizeof reply};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = ::recvmsg(opener_socket, &message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n != ssize_t(sizeof reply)) return open_log_file(path, error);
    UniqueFd fd;
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header))
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
            int received;
            std::memcpy(&received, CMSG_DATA(header), sizeof received);
            fd.reset(received);
        }
    // A path the helper was not given (a reload added it): as we are.
    if (!fd && reply.error == kNotAtStart) return open_log_file(path, error);
    if (!fd) error = reply.error;
    return fd;
}

} // namespace lepus
