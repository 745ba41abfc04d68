// sha256.h: SHA-256 of a byte string, as lowercase hex (FIPS 180-4); used for config hashes.
#pragma once

#include <string>

namespace prophet {
std::string sha256_hex(const std::string& data);
}
