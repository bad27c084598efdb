#include "http/file_cache.h"
#include "support/temp_dir.h"

#include <algorithm>
#include <cstdint>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace lepus {
namespace {

class FileCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(temp_.ok());
        dir_ = temp_.path();
        root_.reset(open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        ASSERT_TRUE(root_);
    }

    void write(const std::string& name, const std::string& contents) {
        std::ofstream(dir_ + "/" + name, std::ios::binary | std::ios::trunc) << contents;
    }

    // A cache entry for `name` as the static handler would build it.
    std::unique_ptr<CachedFile> entry(const std::string& name, size_t small_limit = 1024) {
        auto file = std::make_unique<CachedFile>();
        file->key = "/" + name;
        file->rel_path = name;
        UniqueFd fd(openat(root_.get(), name.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat st;
        EXPECT_TRUE(fd);
        EXPECT_EQ(fstat(fd.get(), &st), 0);
        EXPECT_EQ(load_file_variant(std::move(fd), st, "text/plain", {}, false, small_limit,
                                    file->identity),
                  0);
        return file;
    }

    test::TempDir temp_{"cache"};
    std::string dir_;
    UniqueFd root_;
};

TEST_F(FileCacheTest, LoadFileVariantFormatsMetadata) {
    write("a.txt", "hello");
    struct timespec times[2] = {{1700000000, 0}, {1700000000, 0}};
    ASSERT_EQ(utimensat(root_.get(), "a.txt", times, 0), 0);
    auto file = entry("a.txt");
    const FileVariant& v = file->identity;
    EXPECT_EQ(v.size, 5u);
    EXPECT_EQ(v.mtime, 1700000000);
    EXPECT_EQ(v.etag, "\"6553f100-5\"");
    EXPECT_EQ(v.last_modified_text(), "Tue, 14 Nov 2023 22:13:20 GMT");
    EXPECT_TRUE(v.in_memory);
    EXPECT_EQ(v.data, "hello");
    EXPECT_EQ(v.headers, "Content-Type: text/plain\r\n"
                         "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\n"
                         "ETag: \"6553f100-5\"\r\n"
                         "Accept-Ranges: bytes\r\n");
    auto big = entry("a.txt", 5); // not smaller than the limit: stays on disk
    EXPECT_FALSE(big->identity.in_memory);
    EXPECT_TRUE(big->identity.data.empty());
    EXPECT_TRUE(big->identity.present());
}

TEST_F(FileCacheTest, HitAfterInsertMissOtherwise) {
    write("a", "1");
    FileCache cache(root_.get(), 8, 1000);
    EXPECT_FALSE(cache.find("/a", 0));
    cache.insert(entry("a"));
    FileRef ref = cache.find("/a", 10);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref->identity.data, "1");
    EXPECT_EQ(cache.hits(), 1u);
    EXPECT_EQ(cache.misses(), 1u);
    EXPECT_EQ(cache.size(), 1u);
}

TEST_F(FileCacheTest, EvictsLeastRecentlyUsed) {
    write("a", "1");
    write("b", "2");
    write("c", "3");
    FileCache cache(root_.get(), 2, 1000);
    cache.insert(entry("a"));
    cache.insert(entry("b"));
    EXPECT_TRUE(cache.find("/a", 1)); // a is now more recent than b
    cache.insert(entry("c"));
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.evictions(), 1u);
    EXPECT_FALSE(cache.find("/b", 2));
    EXPECT_TRUE(cache.find("/a", 2));
    EXPECT_TRUE(cache.find("/c", 2));
}

// Restores the process-wide descriptor budget a test lowers.
struct DescriptorBudget {
    explicit DescriptorBudget(size_t budget) : saved(FileCache::descriptor_budget()) {
        FileCache::set_descriptor_budget(budget);
    }
    ~DescriptorBudget() { FileCache::set_descriptor_budget(saved); }
    size_t saved;
};

TEST_F(FileCacheTest, DescriptorBudgetIsSharedByEveryCache) {
    for (int i = 0; i < 40; ++i)
        write("f" + std::to_string(i), "x");
    size_t before = FileCache::descriptors_held();
    DescriptorBudget budget(before + 20);
    FileCache first(root_.get(), 1000, 1000), second(root_.get(), 1000, 1000);
    for (int i = 0; i < 20; ++i)
        first.insert(entry("f" + std::to_string(i)));
    EXPECT_EQ(first.size(), 20u);
    EXPECT_EQ(FileCache::descriptors_held(), before + 20);
    // The second cache's misses find the budget taken: it keeps only its newest.
    for (int i = 20; i < 40; ++i)
        second.insert(entry("f" + std::to_string(i)));
    EXPECT_EQ(second.size(), 1u);
    EXPECT_TRUE(second.find("/f39", 1));
    EXPECT_LE(FileCache::descriptors_held(), before + 21);
    // The first one's next miss gives back its oldest.
    first.insert(entry("f39"));
    EXPECT_LE(FileCache::descriptors_held(), before + 20);
    EXPECT_FALSE(first.find("/f0", 1));
    EXPECT_TRUE(first.find("/f39", 1));
}

TEST_F(FileCacheTest, ShedDescriptorsHalvesTheBudget) {
    for (int i = 0; i < 40; ++i)
        write("f" + std::to_string(i), "x");
    DescriptorBudget budget(SIZE_MAX);
    size_t before = FileCache::descriptors_held();
    {
        FileCache cache(root_.get(), 1000, 1000);
        for (int i = 0; i < 40; ++i)
            cache.insert(entry("f" + std::to_string(i)));
        ASSERT_EQ(FileCache::descriptors_held(), before + 40);
        EXPECT_TRUE(cache.shed_descriptors()); // as after an EMFILE
        EXPECT_EQ(FileCache::descriptor_budget(), std::max<size_t>((before + 40) / 2, 16));
        EXPECT_LE(FileCache::descriptors_held(), FileCache::descriptor_budget());
        EXPECT_TRUE(cache.find("/f39", 1)); // the most recent stay
        EXPECT_FALSE(cache.find("/f0", 1));
    }
    EXPECT_EQ(FileCache::descriptors_held(), before); // every entry gave its count back
    FileCache empty(root_.get(), 8, 1000);
    EXPECT_FALSE(empty.shed_descriptors());
}

TEST_F(FileCacheTest, ReferencedEntryOutlivesEviction) {
    write("a", "still here");
    write("b", "2");
    FileCache cache(root_.get(), 1, 1000);
    FileRef held = cache.insert(entry("a"));
    FileRef copy = held;
    cache.insert(entry("b")); // evicts a
    EXPECT_FALSE(cache.find("/a", 1));
    held.reset();
    // `copy` keeps the evicted entry, fd and memory alive (ASan checks the rest).
    ASSERT_TRUE(copy);
    EXPECT_EQ(copy->identity.data, "still here");
    char buffer[16] = {};
    EXPECT_EQ(pread(copy->identity.fd.get(), buffer, sizeof buffer, 0), 10);
    FileRef moved = std::move(copy);
    EXPECT_FALSE(copy);
    EXPECT_EQ(moved->key, "/a");
}

TEST_F(FileCacheTest, EntriesOutliveTheCache) {
    write("a", "x");
    FileRef held;
    {
        FileCache cache(root_.get(), 4, 1000);
        held = cache.insert(entry("a"));
    }
    EXPECT_EQ(held->identity.data, "x");
}

TEST_F(FileCacheTest, RevalidatesOnlyAfterTheInterval) {
    write("a", "one");
    FileCache cache(root_.get(), 8, 1000);
    auto file = entry("a");
    file->checked_ms = 5000;
    cache.insert(std::move(file));
    write("a", "three"); // size changes
    EXPECT_TRUE(cache.find("/a", 5999)) << "checked less than 1000 ms ago: trusted";
    EXPECT_FALSE(cache.find("/a", 6000)) << "due for revalidation: stale";
    EXPECT_EQ(cache.size(), 0u);
}

TEST_F(FileCacheTest, RevalidationSeesMtimeAndReplacement) {
    write("a", "same");
    FileCache cache(root_.get(), 8, 0);
    cache.insert(entry("a"));
    EXPECT_TRUE(cache.find("/a", 1)) << "unchanged file stays valid";

    struct timespec times[2] = {{1600000000, 0}, {1600000000, 0}};
    ASSERT_EQ(utimensat(root_.get(), "a", times, 0), 0);
    EXPECT_FALSE(cache.find("/a", 2)) << "same size, new mtime";

    cache.insert(entry("a"));
    write("a.new", "same");
    ASSERT_EQ(utimensat(root_.get(), "a.new", times, 0), 0);
    ASSERT_EQ(renameat(root_.get(), "a.new", root_.get(), "a"), 0);
    EXPECT_FALSE(cache.find("/a", 3)) << "same size and mtime, another inode";

    cache.insert(entry("a"));
    ASSERT_EQ(unlinkat(root_.get(), "a", 0), 0);
    EXPECT_FALSE(cache.find("/a", 4)) << "deleted";
}

TEST_F(FileCacheTest, RevalidationSeesGzipSiblingAppear) {
    write("a", "plain");
    FileCache cache(root_.get(), 8, 0);
    cache.insert(entry("a"));
    write("a.gz", "zipped");
    EXPECT_FALSE(cache.find("/a", 1));
}

} // namespace
} // namespace lepus
