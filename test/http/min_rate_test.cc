// MinRate (src/http/min_rate.h): intervals of waiting time, each of which
// must see bytes_per_second x its length moved.
#include "http/min_rate.h"

#include <gtest/gtest.h>

namespace lepus {
namespace {

constexpr uint64_t kInterval = 10000; // ms
constexpr uint64_t kRate = 240;       // bytes/s: 2,400 an interval

TEST(MinRate, AnIntervalShortOfTheRateFails) {
    MinRate rate;
    rate.start(1000);
    EXPECT_EQ(rate.deadline(kInterval), 11000u);
    rate.moved(2399);
    EXPECT_FALSE(rate.passed(11000, kInterval, kRate));
}

TEST(MinRate, AnIntervalAtTheRateStartsTheNext) {
    MinRate rate;
    rate.start(1000);
    rate.moved(2400);
    EXPECT_TRUE(rate.passed(11000, kInterval, kRate));
    EXPECT_EQ(rate.deadline(kInterval), 21000u);
    // The bytes of the last interval do not count for the next.
    EXPECT_FALSE(rate.passed(21000, kInterval, kRate));
}

TEST(MinRate, PausedTimeDoesNotCount) {
    MinRate rate;
    rate.start(0);
    rate.pause(4000); // 4 s waited
    EXPECT_FALSE(rate.waiting());
    rate.wait(100000); // the rest of the interval, 6 s, from here
    EXPECT_TRUE(rate.waiting());
    EXPECT_EQ(rate.deadline(kInterval), 106000u);
    rate.wait(105000); // already waiting: no change
    EXPECT_EQ(rate.deadline(kInterval), 106000u);
}

TEST(MinRate, ARateOfZeroStillWantsAByte) {
    MinRate rate;
    rate.start(0);
    EXPECT_FALSE(rate.passed(kInterval, kInterval, 0));
    rate.moved(1);
    EXPECT_TRUE(rate.passed(kInterval, kInterval, 0));
}

} // namespace
} // namespace lepus
