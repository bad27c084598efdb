// One StaticHandler per reactor thread over the same root: the handlers share
// only the read-only MIME table and the per-thread Date cache, so concurrent use
// must be race-free (this executable also runs under ThreadSanitizer).
#include "http/static_handler.h"
#include "support/temp_dir.h"

#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace lepus {
namespace {

TEST(StaticHandlerThreads, IndependentHandlersServeConcurrently) {
    test::TempDir temp("threads");
    ASSERT_TRUE(temp.ok());
    const std::string& root = temp.path();
    std::ofstream(root + "/a.css") << "a{}";
    std::ofstream(root + "/b.json") << "{}";
    std::ofstream(root + "/big.bin") << std::string(100000, 'x');

    StaticOptions options;
    options.root = root;
    options.cache_revalidate_ms = 0; // revalidate on every request: more shared syscalls
    constexpr int kThreads = 4;
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::string error;
            auto handler = StaticHandler::create(options, error);
            if (!handler) {
                failures[t] = -1;
                return;
            }
            Response out;
            for (int i = 0; i < 300; ++i) {
                Request request;
                request.path = i % 3 == 0 ? "/a.css" : i % 3 == 1 ? "/b.json" : "/big.bin";
                handler->handle(request, true, uint64_t(i), out);
                bool ok = out.head.status == 200 && out.body_bytes() > 0;
                if (i % 3 == 0)
                    ok = ok && out.head.get("Content-Type") == "text/css; charset=utf-8";
                if (i % 3 == 1)
                    ok = ok && out.head.get("Content-Type") == "application/json; charset=utf-8";
                if (!ok) ++failures[t];
            }
        });
    }
    for (std::thread& thread : threads)
        thread.join();
    for (int t = 0; t < kThreads; ++t)
        EXPECT_EQ(failures[t], 0) << "thread " << t;
}

} // namespace
} // namespace lepus
