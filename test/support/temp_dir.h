// The one scratch-directory helper of the C++ tests (the e2e tests have its twin,
// harness.temp_dir()): a fresh directory under $TMPDIR (or /tmp), removed with all its
// content when the object goes out of scope.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace lepus::test {

class TempDir {
public:
    // Makes $TMPDIR/lepus-<name>-XXXXXX; path() is empty when mkdtemp fails, which the
    // test notices at its first file operation (ASSERT_TRUE(dir.ok()) to say so early).
    explicit TempDir(std::string_view name = "test") {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp");
        pattern.append("/lepus-").append(name).append("-XXXXXX");
        if (::mkdtemp(pattern.data()) != nullptr) path_ = std::move(pattern);
    }
    ~TempDir() {
        std::error_code ignored; // a test that already failed must not also throw here
        if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    // True when the directory was made.
    bool ok() const { return !path_.empty(); }

    // The directory, without a trailing '/'.
    const std::string& path() const { return path_; }

    // `relative` inside the directory.
    std::string file(std::string_view relative) const {
        return path_ + "/" + std::string(relative);
    }

private:
    std::string path_;
};

} // namespace lepus::test
