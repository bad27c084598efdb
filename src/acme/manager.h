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
#include <set>
#include <string>
#include <string_view>
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
    // On-demand issuance: a name a TLS client asks for is ordered only when
    // this URL, asked with ?domain=NAME, answers 200; empty: off. At most
    // on_demand_per_hour new names are admitted in an hour.
    std::string on_demand_ask;
    unsigned on_demand_per_hour = 10;

    bool operator==(const AcmeOptions&) const = default;
};

// The names TLS clients asked for that have no certificate (the reactors'
// unknown-name hook), waiting for the ACME thread. Process-wide, so that a
// handshake never touches a manager being replaced by a reload.
class OnDemandRequests {
public:
    static OnDemandRequests& process();
    // Any thread, non-blocking but for a short lock: queues `name` once.
    void push(std::string_view name);
    // The ACME thread: the names queued since the last call.
    std::vector<std::string> take();
    // The ACME thread: `name` may be queued again (refused, or rate-limited).
    void forget(const std::string& name);
    void set_waker(std::function<void()> waker);

private:
    std::mutex mutex_;
    std::vector<std::string> queued_;
    std::set<std::string, std::less<>> seen_; // queued or managed: not queued again
    std::function<void()> waker_;
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
    void admit_on_demand();
    bool ask_allows(const std::string& name, std::string& why);
    void attend(Managed& certificate);
    // When the stored chain of `certificate` is due for renewal (system
    // time); 0 when there is none or it cannot be read.
    time_t renewal_time(const Managed& certificate) const;
    bool sleep_until(std::chrono::steady_clock::time_point when);
    bool stopping();

    AcmeOptions options_;
    std::function<void()> on_changed_;
    std::vector<Managed> managed_;
    std::vector<std::chrono::steady_clock::time_point> admitted_; // on-demand, last hour
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    bool poked_ = false;              // an on-demand name is waiting
    std::atomic<bool> cancel_{false}; // stop_, for libcurl's progress callback
    std::thread thread_;
};

} // namespace lepus::acme
