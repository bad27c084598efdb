// StringHash: a hash for unordered maps keyed by std::string (or string_view)
// that also takes string_view lookups, with std::equal_to<>, so that a find()
// never builds a std::string (C++20 heterogeneous lookup).
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace lepus {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

} // namespace lepus
