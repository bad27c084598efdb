// Helpers for the log tests: file reading and stderr capture (the scratch directory is
// test/support/temp_dir.h, shared by every C++ test).
#pragma once

#include "base/unique_fd.h"
#include "support/temp_dir.h"

#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace lepus::test {

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
}

// The file's lines without their '\n'; a last line lacking '\n' is kept as "<partial>...".
inline std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            lines.push_back("<partial>" + text.substr(start));
            break;
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

inline std::vector<std::string> read_lines(const std::string& path) {
    return split_lines(read_file(path));
}

// Points fd 2 at a file for the object's lifetime, then restores it.
class StderrCapture {
public:
    explicit StderrCapture(const std::string& path)
        : path_(path), saved_(::dup(STDERR_FILENO)),
          file_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {
        ::dup2(file_.get(), STDERR_FILENO);
    }
    ~StderrCapture() { restore(); }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

    // Puts the original stderr back and returns what was written meanwhile.
    std::string finish() {
        restore();
        return read_file(path_);
    }

private:
    void restore() {
        if (saved_) ::dup2(saved_.get(), STDERR_FILENO);
        saved_.reset();
    }

    std::string path_;
    UniqueFd saved_;
    UniqueFd file_;
};

} // namespace lepus::test
