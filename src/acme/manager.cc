#include "acme/manager.h"

#include "acme/http_challenges.h"
#include "acme/keys.h"
#include "acme/storage.h"
#include "base/unique_fd.h"
#include "log/error_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace lepus::acme {
namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names)
        text += (text.empty() ? "" : ",") + name;
    return text;
}

} // namespace

AcmeManager::AcmeManager(AcmeOptions options, std::function<void()> on_changed)
    : options_(std::move(options)), on_changed_(std::move(on_changed)) {
    for (const auto& names : options_.certificates)
        managed_.push_back({names, {}, 0});
}

AcmeManager::~AcmeManager() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cancel_ = true;
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool AcmeManager::start(std::string& error) {
    if (!make_private_folder(options_.state_dir + "/certificates", error) ||
        !make_private_folder(options_.state_dir + "/acme/accounts", error) ||
        !make_private_folder(options_.state_dir + "/acme/challenges", error))
        return false;
    HttpChallenges::process().share_through(options_.state_dir + "/acme/challenges");
    init_http_client_library();
    thread_ = std::thread([this] { run(); });
    return true;
}

bool AcmeManager::stopping() {
    std::lock_guard lock(mutex_);
    return stop_;
}

bool AcmeManager::sleep_until(std::chrono::steady_clock::time_point when) {
    std::unique_lock lock(mutex_);
    wake_.wait_until(lock, when, [this] { return stop_; });
    return !stop_;
}

time_t AcmeManager::renewal_time(const Managed& certificate) const {
    std::string chain;
    if (!read_whole_file(certificate_paths(options_.state_dir, certificate.names).chain, chain))
        return 0;
    auto validity = certificate_validity(chain);
    if (!validity || validity->not_after <= validity->not_before) return 0;
    // Issue 34: renew when a third of the lifetime is left (Let's Encrypt's
    // 90 days: at 60; a six-day certificate: at four).
    return validity->not_after - (validity->not_after - validity->not_before) / 3;
}

void AcmeManager::run() {
    while (!stopping()) {
        auto now = std::chrono::steady_clock::now();
        auto next = now + std::chrono::hours(24);
        for (Managed& certificate : managed_) {
            if (certificate.next <= now) attend(certificate);
            if (stopping()) return;
            next = std::min(next, certificate.next);
        }
        if (!sleep_until(next)) return;
    }
}

void AcmeManager::attend(Managed& certificate) {
    using namespace std::chrono;
    auto schedule_renewal = [&](time_t at) {
        certificate.failures = 0;
        certificate.next = steady_clock::now() + seconds(std::max<time_t>(at - time(nullptr), 1));
    };
    time_t renew_at = renewal_time(certificate);
    if (renew_at > time(nullptr)) return schedule_renewal(renew_at);

    std::string name_list = joined(certificate.names);
    CertificatePaths paths = certificate_paths(options_.state_dir, certificate.names);
    std::string error;
    AcmeError failure;
    bool issued = false;
    if (!make_private_folder(paths.folder, error)) {
        failure = AcmeError{"state folder", 0, {}, error, 0};
    } else {
        // Instances sharing the state folder: one orders, the others wait here
        // and then find its certificate (issue 34's "order once").
        UniqueFd lock(::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
        while (lock && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0 && !stopping())
            std::this_thread::sleep_for(milliseconds(200));
        if (stopping()) return;
        renew_at = renewal_time(certificate);
        if (renew_at > time(nullptr)) { // another instance has just renewed it
            log_info("ACME: %s: certificate found in %s", name_list.c_str(), paths.folder.c_str());
            if (on_changed_) on_changed_();
            return schedule_renewal(renew_at);
        }
        issued = [&] {
            std::string key_path = account_key_path(options_.state_dir, options_.directory_url);
            std::string key_pem;
            EvpKey account_key;
            if (read_whole_file(key_path, key_pem)) account_key = private_key_from_pem(key_pem);
            if (!account_key) {
                account_key = generate_p256_key();
                std::string folder = key_path.substr(0, key_path.rfind('/'));
                if (!account_key || !make_private_folder(folder, error) ||
                    !write_private_file(key_path, private_key_pem(account_key.get()), error)) {
                    failure = AcmeError{"account key", 0, {}, error, 0};
                    return false;
                }
            }
            HttpClient http(options_.ca_root, &cancel_);
            AcmeClient client(http, account_key.get(), options_.directory_url, options_.email);
            IssuedCertificate out;
            log_info("ACME: %s: ordering a certificate from %s", name_list.c_str(),
                     options_.directory_url.c_str());
            if (!client.issue(
                    certificate.names, options_.challenge_types, [this] { return stopping(); }, out,
                    failure))
                return false;
            // The key first: a chain without its key is never left behind.
            if (!write_private_file(paths.key, out.key_pem, error) ||
                !write_private_file(paths.chain, out.chain_pem, error)) {
                failure = AcmeError{"storing the certificate", 0, {}, error, 0};
                return false;
            }
            return true;
        }();
    }
    if (stopping()) return;
    if (issued) {
        log_info("ACME: %s: certificate issued, stored in %s", name_list.c_str(),
                 paths.folder.c_str());
        if (on_changed_) on_changed_();
        return schedule_renewal(renewal_time(certificate));
    }
    auto delay = options_.retry_base * (uint64_t{1} << std::min(certificate.failures, 20u));
    delay = std::min<milliseconds>(delay, options_.retry_max);
    delay = std::max<milliseconds>(delay, seconds(failure.retry_after_s));
    ++certificate.failures;
    certificate.next = steady_clock::now() + delay;
    bool serving = renewal_time(certificate) != 0;
    log_error("ACME: %s: %s; %s; attempt %u, next in %lld s", name_list.c_str(),
              failure.text().c_str(),
              serving ? "the current certificate keeps serving" : "no certificate yet",
              certificate.failures, static_cast<long long>(duration_cast<seconds>(delay).count()));
}

} // namespace lepus::acme
