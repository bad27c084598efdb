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

// A name a client sent in SNI that could be ordered: lower-case letters,
// digits, '-' and dots, two labels at least (no IP, no wildcard).
bool orderable(std::string_view name) {
    if (name.empty() || name.size() > 253 || name.find('.') == std::string_view::npos ||
        name.front() == '.' || name.back() == '.' || name.find("..") != std::string_view::npos)
        return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    return true;
}

constexpr size_t kOnDemandRemembered = 10000; // bounds what scanners' SNI can make us hold

} // namespace

OnDemandRequests& OnDemandRequests::process() {
    static OnDemandRequests requests;
    return requests;
}

void OnDemandRequests::push(std::string_view name) {
    std::string lower(name);
    for (char& c : lower)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (!orderable(lower)) return;
    std::lock_guard lock(mutex_);
    if (seen_.size() >= kOnDemandRemembered || !seen_.insert(lower).second) return;
    queued_.push_back(std::move(lower));
    if (waker_) waker_();
}

std::vector<std::string> OnDemandRequests::take() {
    std::lock_guard lock(mutex_);
    return std::exchange(queued_, {});
}

void OnDemandRequests::forget(const std::string& name) {
    std::lock_guard lock(mutex_);
    seen_.erase(name);
}

void OnDemandRequests::set_waker(std::function<void()> waker) {
    std::lock_guard lock(mutex_);
    waker_ = std::move(waker);
}

AcmeManager::AcmeManager(AcmeOptions options, std::function<void()> on_changed)
    : options_(std::move(options)), on_changed_(std::move(on_changed)) {
    for (const auto& names : options_.certificates)
        managed_.push_back({names, {}, 0});
}

AcmeManager::~AcmeManager() {
    OnDemandRequests::process().set_waker(nullptr); // no handshake reaches this manager now
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
    if (!options_.on_demand_ask.empty()) {
        for (const std::string& name : on_demand_names(options_.state_dir)) {
            managed_.push_back({{name}, {}, 0});
            OnDemandRequests::process().push(name); // marks it seen; admitted below
        }
        OnDemandRequests::process().take();
        OnDemandRequests::process().set_waker([this] {
            {
                std::lock_guard lock(mutex_);
                poked_ = true;
            }
            wake_.notify_all();
        });
    }
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
    wake_.wait_until(lock, when, [this] { return stop_ || poked_; });
    poked_ = false;
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
        if (!options_.on_demand_ask.empty()) admit_on_demand();
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

void AcmeManager::admit_on_demand() {
    using namespace std::chrono;
    for (const std::string& name : OnDemandRequests::process().take()) {
        auto now = steady_clock::now();
        std::erase_if(admitted_, [&](auto at) { return now - at > hours(1); });
        std::string why;
        if (admitted_.size() >= options_.on_demand_per_hour) {
            log_warn("ACME: on-demand: %s not ordered: %u names admitted in the last hour already",
                     name.c_str(), options_.on_demand_per_hour);
            OnDemandRequests::process().forget(name);
            continue;
        }
        if (!ask_allows(name, why)) {
            log_warn("ACME: on-demand: %s refused by the ask URL (%s)", name.c_str(), why.c_str());
            OnDemandRequests::process().forget(name);
            continue;
        }
        CertificatePaths paths = certificate_paths(options_.state_dir, {name});
        std::string error;
        if (!make_private_folder(paths.folder, error) ||
            !write_private_file(paths.folder + "/on-demand", name + "\n", error)) {
            log_error("ACME: on-demand: %s: %s", name.c_str(), error.c_str());
            OnDemandRequests::process().forget(name);
            continue;
        }
        admitted_.push_back(now);
        log_info("ACME: on-demand: %s allowed by the ask URL", name.c_str());
        managed_.push_back({{name}, {}, 0});
    }
}

// Caddy's on_demand_tls ask: GET URL?domain=NAME, and only 200 means yes.
bool AcmeManager::ask_allows(const std::string& name, std::string& why) {
    HttpClient http({}, &cancel_);
    std::string url = options_.on_demand_ask;
    url += (url.find('?') == std::string::npos ? "?" : "&") + std::string("domain=") + name;
    HttpResponse response = http.get(url);
    if (response.status == 200) return true;
    why = response.status ? "status " + std::to_string(response.status) : response.error;
    return false;
}

} // namespace lepus::acme
