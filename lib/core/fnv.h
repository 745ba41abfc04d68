// fnv.h: FNV-1a, the 64-bit hash the project uses to name content it compares within a run (placements across
// ranks, LP models in a cache); not a checksum for data at rest (core/sha256.h) and not collision-proof.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace prophet {

struct Fnv1a {
    uint64_t h = 0xcbf29ce484222325ull;  // the FNV-1a 64-bit offset basis
    // byte by byte (the standard FNV-1a)
    void bytes(const void* data, size_t n) {
        const unsigned char* b = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    }
    // one 64-bit word as one step (eight times fewer steps over large arrays)
    void word(uint64_t v) { h = (h ^ v) * 1099511628211ull; }
    void word(double v) {
        uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        word(bits);
    }
};

}  // namespace prophet
