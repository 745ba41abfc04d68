// paths.cpp: the files a sweep names: resolution against the sweep file's directory, kind, content hash.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/sha256.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) { return value_to_toml(Value(s)); }

bool is_generator(const std::string& path) { return fs::path(path).extension() == ".toml"; }

std::string resolve_path(const SweepSpec& spec, const std::string& path) {
    std::error_code ec;
    if (fs::exists(path, ec) || fs::path(path).is_absolute()) return path;
    const fs::path alt = fs::path(spec.dir) / path;
    if (fs::exists(alt, ec)) return alt.string();
    return path;
}

std::string stem(const std::string& path) { return fs::path(path).stem().string(); }

std::string file_sha256(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return sha256_hex(buffer.str());
}


}  // namespace prophet::sweep::detail
