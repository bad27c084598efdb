// AcmeManager: the ACME thread. For each managed certificate (a set of names)
// it keeps the stored one while more than a third of its lifetime is left,
// and otherwise orders a new one (acme/client.h), under a lock file per
// certificate so that instances sharing the state folder order it once.
// A failure logs one error line with the CA's problem document and is tried
// again with exponential back-off (a Retry-After longer than that wins);
// the certificate being served keeps serving meanwhile. When a certificate is
// written (or found written by another instance), `on_changed` runs on the
// ACME thread, and the server swaps its TLS context (server/server.cc).
#pragma once

#include "acme/client.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lepus::acme {

inline constexpr const char* kLetsEncryptDirectory =
    "https://acme-v02.api.letsencrypt.org/directory";
inline constexpr const char* kLetsEncryptStagingDirectory =
    "https://acme-staging-v02.api.letsencrypt.org/directory";

struct AcmeOptions {
    std::string directory_url = kLetsEncryptDirectory;
    std::string email;   // the account's contact; empty: none
    std::string ca_root; // PEM file trusted for the CA's HTTPS; empty: the system's roots
    std::string state_dir;
    std::vector<std::vector<std::string>> certificates; // the names of each
    std::vector<ChallengeType> challenge_types;         // in order of preference
    // The first retry after a failure; doubled each time, up to retry_max.
    std::chrono::milliseconds retry_base{std::chrono::seconds(60)};
    std::chrono::milliseconds retry_max{std::chrono::hours(12)};

    bool operator==(const AcmeOptions&) const = default;
};

class AcmeManager {
public:
    AcmeManager(AcmeOptions options, std::function<void()> on_changed);
    ~AcmeManager(); // stops the thread (an order in flight is abandoned at its next poll)
    AcmeManager(const AcmeManager&) = delete;
    AcmeManager& operator=(const AcmeManager&) = delete;

    // Makes the state folders and starts the thread. False with `error` when
    // the state folder cannot be made.
    bool start(std::string& error);

private:
    struct Managed {
        std::vector<std::string> names;
        std::chrono::steady_clock::time_point next{};
        unsigned failures = 0;
    };
    void run();
    void attend(Managed& certificate);
    // When the stored chain of `certificate` is due for renewal (system
    // time); 0 when there is none or it cannot be read.
    time_t renewal_time(const Managed& certificate) const;
    bool sleep_until(std::chrono::steady_clock::time_point when);
    bool stopping();

    AcmeOptions options_;
    std::function<void()> on_changed_;
    std::vector<Managed> managed_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::atomic<bool> cancel_{false}; // stop_, for libcurl's progress callback
    std::thread thread_;
};

} // namespace lepus::acme
