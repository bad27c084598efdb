#include "net/timer_wheel.h"

#include <algorithm>
#include <cstddef>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace lepus {
namespace {

constexpr uint64_t kSecond = 1000;
constexpr uint64_t kHour = 3600 * kSecond;
constexpr uint64_t kDay = 24 * kHour;

struct Fired {
    int id;
    uint64_t at; // the wheel's time when the callback ran
};

// A timer owner, standard-layout so the callback can recover it with offsetof.
struct Probe {
    TimerEntry entry{&Probe::on_timer};
    int id = 0;
    TimerWheel* wheel = nullptr;
    std::vector<Fired>* log = nullptr;
    void (*action)(Probe& self) = nullptr; // extra work done inside the callback
    void* context = nullptr;

    static Probe& of(TimerEntry& entry) {
        return *reinterpret_cast<Probe*>(reinterpret_cast<char*>(&entry) - offsetof(Probe, entry));
    }
    static void on_timer(TimerEntry& entry) {
        Probe& self = of(entry);
        EXPECT_FALSE(self.entry.scheduled()); // unlinked before its callback runs
        if (self.log) self.log->push_back({self.id, self.wheel->now()});
        if (self.action) self.action(self);
    }
};

std::vector<std::unique_ptr<Probe>> make_probes(size_t count, TimerWheel& wheel,
                                                std::vector<Fired>& log) {
    std::vector<std::unique_ptr<Probe>> probes;
    for (size_t i = 0; i < count; ++i) {
        probes.push_back(std::make_unique<Probe>());
        probes.back()->id = int(i);
        probes.back()->wheel = &wheel;
        probes.back()->log = &log;
    }
    return probes;
}

TEST(TimerWheel, EmptyWheelHasNoExpiry) {
    TimerWheel wheel(12345);
    EXPECT_EQ(wheel.size(), 0u);
    EXPECT_FALSE(wheel.next_expiry().has_value());
    EXPECT_EQ(wheel.expire(999999), 0u);
    EXPECT_EQ(wheel.now(), 999999u);
    EXPECT_TRUE(wheel.validate());
}

TEST(TimerWheel, FiresInDeadlineOrderAcrossLevels) {
    TimerWheel wheel(1000);
    std::vector<Fired> log;
    // One deadline per level and some sharing a slot, scheduled out of order.
    const std::vector<uint64_t> deadlines = {1000 + 3 * kDay, 1000 + 70,   1000 + 5,
                                             1000 + kHour,    1000 + 4100, 1000 + 300000,
                                             1000 + 5,        1000 + 63,   1000 + 64};
    auto probes = make_probes(deadlines.size(), wheel, log);
    for (size_t i = 0; i < deadlines.size(); ++i)
        wheel.schedule(probes[i]->entry, deadlines[i]);
    EXPECT_EQ(wheel.size(), deadlines.size());
    ASSERT_TRUE(wheel.validate());

    // Step one millisecond at a time through the first 10 s, then by 997 ms
    // to past the hour, then jump: each entry fires at the first call >= its deadline.
    std::vector<uint64_t> calls;
    uint64_t now = 1000;
    while (now < 1000 + kHour + 10 * kSecond) {
        now += now < 11000 ? 1 : 997;
        calls.push_back(now);
        wheel.expire(now);
        ASSERT_TRUE(wheel.validate());
    }
    calls.push_back(1000 + 3 * kDay - 1);
    wheel.expire(calls.back());
    EXPECT_EQ(log.size(), deadlines.size() - 1);
    calls.push_back(1000 + 3 * kDay);
    wheel.expire(calls.back());
    ASSERT_EQ(log.size(), deadlines.size());
    for (const Fired& fired : log) {
        const uint64_t deadline = deadlines[size_t(fired.id)];
        EXPECT_EQ(fired.at, *std::lower_bound(calls.begin(), calls.end(), deadline))
            << "probe " << fired.id;
    }
    for (size_t i = 1; i < log.size(); ++i)
        EXPECT_LE(deadlines[size_t(log[i - 1].id)], deadlines[size_t(log[i].id)]);
    EXPECT_EQ(wheel.size(), 0u);
    EXPECT_TRUE(wheel.validate());
}

TEST(TimerWheel, PastDeadlineFiresAtNextExpireEvenWithSameTime) {
    TimerWheel wheel(5000);
    std::vector<Fired> log;
    auto probes = make_probes(2, wheel, log);
    wheel.schedule(probes[0]->entry, 10);
    wheel.schedule(probes[1]->entry, 5000);
    EXPECT_EQ(wheel.next_expiry(), 5000u);
    EXPECT_TRUE(wheel.validate());
    EXPECT_EQ(wheel.expire(5000), 2u);
    EXPECT_EQ(probes[0]->entry.deadline(), 10u);
}

TEST(TimerWheel, EarlierTimeThanBeforeCountsAsTheSameTime) {
    TimerWheel wheel(5000);
    std::vector<Fired> log;
    auto probes = make_probes(2, wheel, log);
    wheel.schedule(probes[0]->entry, 5000);
    wheel.schedule(probes[1]->entry, 5001);
    EXPECT_EQ(wheel.expire(4000), 1u); // the clock went back: do not rewind the wheel
    EXPECT_EQ(wheel.now(), 5000u);
    EXPECT_EQ(wheel.expire(5001), 1u);
}

TEST(TimerWheel, CancelPreventsFiring) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(3, wheel, log);
    wheel.schedule(probes[0]->entry, 10);
    wheel.schedule(probes[1]->entry, 10);
    wheel.schedule(probes[2]->entry, 10 * kHour);
    wheel.cancel(probes[0]->entry);
    wheel.cancel(probes[2]->entry);
    wheel.cancel(probes[2]->entry); // twice is harmless
    EXPECT_FALSE(probes[0]->entry.scheduled());
    EXPECT_TRUE(probes[1]->entry.scheduled());
    EXPECT_EQ(wheel.size(), 1u);
    EXPECT_TRUE(wheel.validate());
    EXPECT_EQ(wheel.expire(20 * kHour), 1u);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log[0].id, 1);
    EXPECT_FALSE(wheel.next_expiry().has_value());
}

TEST(TimerWheel, DestroyedEntryUnlinksItself) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    {
        auto probes = make_probes(4, wheel, log);
        for (auto& probe : probes)
            wheel.schedule(probe->entry, 100);
        EXPECT_EQ(wheel.size(), 4u);
    }
    EXPECT_EQ(wheel.size(), 0u);
    EXPECT_TRUE(wheel.validate());
    EXPECT_EQ(wheel.expire(1000), 0u);
}

TEST(TimerWheel, DestroyedWheelReleasesEntries) {
    std::vector<Fired> log;
    Probe probe;
    {
        TimerWheel wheel(0);
        probe.wheel = &wheel;
        wheel.schedule(probe.entry, 10 * kDay);
        EXPECT_TRUE(probe.entry.scheduled());
    }
    EXPECT_FALSE(probe.entry.scheduled()); // and its destructor must not touch the wheel
}

TEST(TimerWheel, RefreshWithinSlackKeepsDeadline) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(1, wheel, log);
    TimerEntry& entry = probes[0]->entry;
    wheel.schedule(entry, 1000);
    wheel.refresh(entry, 1299, 300);
    EXPECT_EQ(entry.deadline(), 1000u); // within slack: untouched
    wheel.refresh(entry, 1300, 300);
    EXPECT_EQ(entry.deadline(), 1300u); // at the slack: re-linked
    wheel.refresh(entry, 900, 300);
    EXPECT_EQ(entry.deadline(), 900u); // earlier: always re-linked
    wheel.refresh(entry, 5000, 0);
    EXPECT_EQ(entry.deadline(), 5000u); // no slack: always re-linked
    EXPECT_TRUE(wheel.validate());
    EXPECT_EQ(wheel.expire(4999), 0u);
    EXPECT_EQ(wheel.expire(5000), 1u);
    wheel.refresh(entry, 6000); // not scheduled: schedules
    EXPECT_TRUE(entry.scheduled());
    EXPECT_EQ(entry.deadline(), 6000u);
}

// The keepalive pattern: the owner keeps its real deadline, refreshes lazily on
// each request, and re-arms from the callback when woken early.
struct LazyConnection {
    TimerEntry timer{&LazyConnection::on_timer};
    TimerWheel* wheel = nullptr;
    uint64_t real_deadline = 0;
    int timeouts = 0;
    uint64_t timed_out_at = 0;
    int early_wakeups = 0;

    static void on_timer(TimerEntry& entry) {
        auto& self = *reinterpret_cast<LazyConnection*>(reinterpret_cast<char*>(&entry) -
                                                        offsetof(LazyConnection, timer));
        if (self.wheel->now() < self.real_deadline) {
            ++self.early_wakeups;
            self.wheel->schedule(self.timer, self.real_deadline);
            return;
        }
        ++self.timeouts;
        self.timed_out_at = self.wheel->now();
    }
};

TEST(TimerWheel, RefreshedOwnerRearmsFromItsCallback) {
    TimerWheel wheel(0);
    LazyConnection conn;
    conn.wheel = &wheel;
    uint64_t now = 0;
    // A request every 50 ms for 10 s, with a 5 s keepalive timeout.
    for (; now < 10 * kSecond; now += 50) {
        wheel.expire(now);
        conn.real_deadline = now + 5 * kSecond;
        wheel.refresh(conn.timer, conn.real_deadline);
    }
    EXPECT_EQ(conn.timeouts, 0);
    while (auto next = wheel.next_expiry()) {
        now = *next;
        wheel.expire(now);
    }
    EXPECT_EQ(conn.timeouts, 1);
    EXPECT_EQ(conn.timed_out_at, conn.real_deadline);
    EXPECT_LE(conn.early_wakeups, 1);
}

TEST(TimerWheel, CallbackCancelsAnotherEntryOfTheSameBatch) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(2, wheel, log);
    // Each cancels the other: whichever runs first wins, the other must not run.
    for (int i = 0; i < 2; ++i) {
        probes[size_t(i)]->context = probes[size_t(1 - i)].get();
        probes[size_t(i)]->action = [](Probe& self) {
            self.wheel->cancel(static_cast<Probe*>(self.context)->entry);
        };
    }
    wheel.schedule(probes[0]->entry, 40);
    wheel.schedule(probes[1]->entry, 70); // another slot and level, same batch
    EXPECT_EQ(wheel.expire(100), 1u);
    EXPECT_EQ(log.size(), 1u);
    EXPECT_EQ(wheel.size(), 0u);
    EXPECT_TRUE(wheel.validate());
}

TEST(TimerWheel, CallbackDestroysAnotherOwnerOfTheSameBatch) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(3, wheel, log);
    // probes[0] frees the others; under ASan a dangling batch link would show.
    probes[0]->context = &probes;
    probes[0]->action = [](Probe& self) {
        auto& all = *static_cast<std::vector<std::unique_ptr<Probe>>*>(self.context);
        all[1].reset();
        all[2].reset();
    };
    wheel.schedule(probes[0]->entry, 7);
    wheel.schedule(probes[1]->entry, 7);
    wheel.schedule(probes[2]->entry, 9);
    EXPECT_EQ(wheel.expire(10), 1u);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log[0].id, 0);
    EXPECT_EQ(wheel.size(), 0u);
    EXPECT_TRUE(wheel.validate());
}

TEST(TimerWheel, CallbackReschedulesLaterEntryOfTheSameBatch) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(2, wheel, log);
    probes[0]->context = probes[1].get();
    probes[0]->action = [](Probe& self) {
        self.wheel->schedule(static_cast<Probe*>(self.context)->entry, 500);
    };
    wheel.schedule(probes[0]->entry, 5);
    wheel.schedule(probes[1]->entry, 5);
    EXPECT_EQ(wheel.expire(10), 1u);
    EXPECT_TRUE(probes[1]->entry.scheduled());
    EXPECT_TRUE(wheel.validate());
    EXPECT_LE(wheel.next_expiry(), 500u); // may be a cascade before 500, never after
    EXPECT_EQ(wheel.expire(499), 0u);
    EXPECT_EQ(wheel.expire(500), 1u);
    EXPECT_EQ(log.back().id, 1);
}

TEST(TimerWheel, PeriodicTimerRearmsFromItsOwnCallback) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(1, wheel, log);
    probes[0]->action = [](Probe& self) {
        if (self.log->size() < 50) self.wheel->schedule(self.entry, self.wheel->now() + 100);
    };
    wheel.schedule(probes[0]->entry, 100);
    for (uint64_t now = 0; now <= 10 * kSecond; now += 7)
        wheel.expire(now);
    ASSERT_EQ(log.size(), 50u);
    // Each firing is the first expire() call at or after its deadline.
    uint64_t deadline = 100;
    for (const Fired& fired : log) {
        EXPECT_GE(fired.at, deadline);
        EXPECT_LT(fired.at, deadline + 7);
        deadline = fired.at + 100;
    }
}

TEST(TimerWheel, CallbackRescheduledInThePastFiresAtNextExpire) {
    TimerWheel wheel(0);
    std::vector<Fired> log;
    auto probes = make_probes(1, wheel, log);
    probes[0]->action = [](Probe& self) {
        if (self.log->size() < 3) self.wheel->schedule(self.entry, 0);
    };
    wheel.schedule(probes[0]->entry, 10);
    EXPECT_EQ(wheel.expire(10), 1u); // not looping inside one call
    EXPECT_EQ(wheel.next_expiry(), 10u);
    EXPECT_EQ(wheel.expire(10), 1u);
    EXPECT_EQ(wheel.expire(11), 1u);
    EXPECT_EQ(wheel.expire(12), 0u);
}

// Follows next_expiry() as a reactor arming its timerfd would, and counts the
// wake-ups: far timers must cascade down a level per wake-up at most.
TEST(TimerWheel, FarTimersFireOnTimeWithFewWakeups) {
    for (uint64_t start :
         {uint64_t(0), uint64_t(1) << 36, (uint64_t(1) << 36) - 7, uint64_t(987654321)}) {
        const std::vector<uint64_t> offsets = {2 * kHour + 17, kDay + 1,   9 * kDay + 3,
                                               400 * kDay,     900 * kDay, 5 * 365 * kDay};
        for (uint64_t offset : offsets) {
            TimerWheel wheel(start);
            std::vector<Fired> log;
            auto probes = make_probes(1, wheel, log);
            wheel.schedule(probes[0]->entry, start + offset);
            int wakeups = 0;
            while (auto next = wheel.next_expiry()) {
                ASSERT_LE(*next, start + offset);
                ASSERT_GT(*next, wheel.now());
                wheel.expire(*next);
                ASSERT_TRUE(wheel.validate());
                ++wakeups;
                ASSERT_LT(wakeups, 100);
            }
            ASSERT_EQ(log.size(), 1u);
            EXPECT_EQ(log[0].at, start + offset);
            // One wake-up per level, plus one per 2^36 ms block for the overflow list.
            EXPECT_LE(wakeups, int(TimerWheel::kLevels + offset / (uint64_t(1) << 36) + 1))
                << "start " << start << " offset " << offset;
        }
    }
}

TEST(TimerWheel, FarTimersFireAtFirstCallPastDeadlineWithCoarseSteps) {
    const uint64_t start = 1'700'000'000'000; // a realistic CLOCK_MONOTONIC-ish value
    TimerWheel wheel(start);
    std::vector<Fired> log;
    auto probes = make_probes(5, wheel, log);
    const uint64_t deadlines[] = {start + kHour, start + 7 * kDay + 1, start + 30 * kDay + 5,
                                  start + 800 * kDay, start + 3 * 365 * kDay};
    for (size_t i = 0; i < 5; ++i)
        wheel.schedule(probes[i]->entry, deadlines[i]);
    uint64_t previous = start;
    for (uint64_t now = start; log.size() < 5; now += 13 * kHour + 11) {
        wheel.expire(now);
        ASSERT_TRUE(wheel.validate());
        for (const Fired& fired : log) {
            EXPECT_GE(fired.at, deadlines[fired.id]);
            EXPECT_TRUE(fired.at == now || fired.at <= previous);
        }
        for (size_t i = 0; i < 5; ++i)
            EXPECT_EQ(probes[i]->entry.scheduled(), deadlines[i] > now);
        previous = now;
    }
}

// Random schedule / refresh / cancel / expire against a multimap model.
void run_random_model(uint64_t seed, uint64_t start) {
    std::mt19937_64 random(seed);
    TimerWheel wheel(start);
    std::vector<Fired> log;
    constexpr size_t kProbes = 500;
    auto probes = make_probes(kProbes, wheel, log);
    std::multimap<uint64_t, int> model; // deadline -> probe id
    std::vector<std::multimap<uint64_t, int>::iterator> where(kProbes, model.end());
    uint64_t now = start;

    auto model_remove = [&](int id) {
        if (where[size_t(id)] != model.end()) model.erase(where[size_t(id)]);
        where[size_t(id)] = model.end();
    };
    auto random_deadline = [&]() -> uint64_t {
        // Spread over every level: from the past to a few years ahead.
        const unsigned bits = unsigned(random() % 42);
        const uint64_t delta = random() & ((uint64_t(1) << bits) - 1);
        if (random() % 16 == 0) return now > delta ? now - delta : 0;
        return now + delta;
    };

    for (int step = 0; step < 50000; ++step) {
        const int id = int(random() % kProbes);
        TimerEntry& entry = probes[size_t(id)]->entry;
        switch (random() % 8) {
        case 0:
        case 1:
        case 2: {
            const uint64_t deadline = random_deadline();
            wheel.schedule(entry, deadline);
            model_remove(id);
            where[size_t(id)] = model.emplace(deadline, id);
            break;
        }
        case 3: {
            const uint64_t base = entry.scheduled() ? entry.deadline() : now;
            const uint64_t deadline = base + random() % 600;
            wheel.refresh(entry, deadline, 300);
            model_remove(id);
            where[size_t(id)] = model.emplace(entry.deadline(), id);
            break;
        }
        case 4:
            wheel.cancel(entry);
            model_remove(id);
            break;
        default: {
            // Small steps mostly, sometimes to the next expiry, sometimes huge.
            const unsigned kind = unsigned(random() % 4);
            if (kind == 0)
                now += random() % (uint64_t(1) << unsigned(random() % 40));
            else if (kind == 1 && wheel.next_expiry())
                now = std::max(now, *wheel.next_expiry());
            else
                now += random() % 100;
            log.clear();
            const size_t fired = wheel.expire(now);
            EXPECT_EQ(fired, log.size());
            for (const Fired& f : log) {
                ASSERT_NE(where[size_t(f.id)], model.end()) << "fired twice or cancelled";
                ASSERT_LE(where[size_t(f.id)]->first, now) << "fired early";
                model_remove(f.id);
            }
            ASSERT_TRUE(model.empty() || model.begin()->first > now) << "missed a deadline";
            break;
        }
        }
        ASSERT_EQ(wheel.size(), model.size());
        const auto next = wheel.next_expiry();
        ASSERT_EQ(next.has_value(), !model.empty());
        if (next) {
            ASSERT_LE(*next, std::max(model.begin()->first, now));
        }
        if (step % 16 == 0) {
            ASSERT_TRUE(wheel.validate()) << "step " << step;
        }
    }
    ASSERT_TRUE(wheel.validate());
}

TEST(TimerWheel, RandomOperationsMatchModel) {
    run_random_model(1, 0);
    run_random_model(2, 1'700'000'000'000);
    run_random_model(3, (uint64_t(1) << 36) - 1000); // crosses the overflow boundary
    run_random_model(4, (uint64_t(1) << 42) - 3);
    for (uint64_t seed = 5; seed < 9; ++seed)
        run_random_model(seed, std::mt19937_64(seed)() >> 20);
}

} // namespace
} // namespace lepus
