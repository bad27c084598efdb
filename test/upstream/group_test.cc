// upstream::Group: how a request picks a backend. The pools here never
// connect: picking reads only their addresses, loads and down marks.
#include "upstream/group.h"

#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace lepus::upstream {
namespace {

constexpr ProtocolNames kNames{"test", "--t", "--t"};

class IdlePool final : public Pool {
public:
    IdlePool(Reactor& reactor, const std::string& address)
        : Pool(reactor, options_for(address), nullptr, kNames) {}

private:
    static PoolOptions options_for(const std::string& address) {
        PoolOptions options;
        options.address = *parse_backend_address(address);
        return options;
    }
    std::unique_ptr<Connection> make_connection() override { return nullptr; }
};

class GroupTest : public ::testing::Test {
protected:
    std::vector<std::shared_ptr<Pool>> pools(size_t count) {
        std::vector<std::shared_ptr<Pool>> out;
        for (size_t i = 0; i < count; ++i)
            out.push_back(pool(i));
        return out;
    }
    std::shared_ptr<Pool> pool(size_t i) {
        while (made_.size() <= i)
            made_.push_back(std::make_shared<IdlePool>(
                reactor_, "127.0.0.1:" + std::to_string(9000 + made_.size())));
        return made_[i];
    }
    size_t index_of(const Pool& pool) const {
        for (size_t i = 0; i < made_.size(); ++i)
            if (made_[i].get() == &pool) return i;
        return size_t(-1);
    }
    // Which backend each of `keys` hashes to.
    std::vector<size_t> owners(Group& group, size_t keys) {
        std::vector<size_t> out;
        for (size_t key = 0; key < keys; ++key)
            out.push_back(index_of(group.pick(0, "session-" + std::to_string(key))));
        return out;
    }

    ReactorLoad load_;
    std::atomic<int64_t> live_{0};
    Reactor reactor_{ReactorOptions{.max_fds = 64}, load_, live_,
                     [](Reactor&, const AcceptedSocket&, void*) {}, nullptr};
    std::vector<std::shared_ptr<Pool>> made_;
};

TEST(Balancing, Parse) {
    EXPECT_EQ(parse_balance("round_robin"), Balance::RoundRobin);
    EXPECT_EQ(parse_balance("least_conn"), Balance::LeastConn);
    EXPECT_EQ(parse_balance("hash"), Balance::Hash);
    EXPECT_FALSE(parse_balance("random"));
    EXPECT_EQ(parse_hash_key("client")->source, HashKey::Source::Client);
    EXPECT_EQ(parse_hash_key("header:X-User")->name, "X-User");
    EXPECT_EQ(parse_hash_key("cookie:sid")->source, HashKey::Source::Cookie);
    for (const char* bad : {"", "header:", "cookie:", "ip", "header"})
        EXPECT_FALSE(parse_hash_key(bad)) << bad;
}

// nginx's smooth weighted round robin: 5,1,1 spreads the light ones.
TEST_F(GroupTest, WeightedRoundRobinIsSmooth) {
    Balancing weighted;
    weighted.weights = {5, 1, 1};
    Group group(pools(3), weighted);
    std::string order;
    for (int i = 0; i < 14; ++i)
        order += char('a' + index_of(group.pick(0, {})));
    EXPECT_EQ(order, "aabacaaaabacaa");
}

TEST_F(GroupTest, DownBackendIsPassedOverAndSkipIsNotChosen) {
    Group group(pools(3), Balancing{});
    made_[1]->down_until_ms = 1000;
    for (int i = 0; i < 6; ++i)
        EXPECT_NE(index_of(group.pick(500, {})), 1u);
    EXPECT_EQ(index_of(group.pick(500, {}, made_[0].get())), 2u);
    // Every one down: still one is tried (it may be back).
    made_[0]->down_until_ms = made_[2]->down_until_ms = 1000;
    EXPECT_LT(index_of(group.pick(500, {})), 3u);
}

// A backend back in at 1 s is eased in over slow_start (10 s): almost
// nothing at first, a third of the requests halfway (weight 50 of 100 against
// the other's 100), half once the 10 s are over. Least connections, with
// nothing in flight, prefers the backend at its whole weight.
TEST_F(GroupTest, SlowStartEasesABackendBackIn) {
    Balancing balancing;
    balancing.slow_start_ms = 10000;
    Group group(pools(2), balancing);
    made_[1]->back_since_ms = 1000;
    auto share_of_b = [&](uint64_t now_ms) {
        int count = 0;
        for (int i = 0; i < 300; ++i)
            count += index_of(group.pick(now_ms, {})) == 1;
        return count;
    };
    EXPECT_LE(share_of_b(1000), 3);
    EXPECT_NEAR(share_of_b(6000), 100, 2);
    EXPECT_EQ(share_of_b(11000), 150);

    balancing.balance = Balance::LeastConn;
    Group least(pools(2), balancing);
    for (int i = 0; i < 6; ++i)
        EXPECT_EQ(index_of(least.pick(1000, {})), 0u);
    EXPECT_EQ(index_of(least.pick(11000, {})) + index_of(least.pick(11000, {})), 1u);
}

// Consistent hashing: a key stays on its backend; adding a fourth backend
// moves only the keys it takes (about a quarter), and one backend going down
// moves only its own keys.
TEST_F(GroupTest, HashingIsStableWhenABackendIsAdded) {
    Balancing hash;
    hash.balance = Balance::Hash;
    Group three(pools(3), hash);
    std::vector<size_t> before = owners(three, 10000);
    EXPECT_EQ(before, owners(three, 10000));
    std::map<size_t, int> spread;
    for (size_t owner : before)
        ++spread[owner];
    for (auto [owner, count] : spread)
        EXPECT_GT(count, 2000) << owner; // roughly a third each
    Group four(pools(4), hash);
    std::vector<size_t> after = owners(four, 10000);
    int moved = 0;
    for (size_t key = 0; key < before.size(); ++key) {
        if (before[key] == after[key]) continue;
        ++moved;
        EXPECT_EQ(after[key], 3u); // only to the new backend
    }
    EXPECT_GT(moved, 1500);
    EXPECT_LT(moved, 3500);

    made_[0]->down_until_ms = 1000;
    for (size_t key = 0; key < 2000; ++key) {
        size_t owner = index_of(three.pick(500, "session-" + std::to_string(key)));
        EXPECT_NE(owner, 0u);
        if (before[key] != 0) {
            EXPECT_EQ(owner, before[key]) << key;
        }
    }
}

} // namespace
} // namespace lepus::upstream
