// rng.h: a small, seeded, platform-independent random generator (xoshiro256** seeded by splitmix64).
// std::mt19937 is portable but std::*_distribution is not, so distributions are written out here: the
// same seed gives the same trace or initialisation on every compiler.
#pragma once

#include <cmath>
#include <cstdint>

namespace prophet {

class Rng {
  public:
    explicit Rng(uint64_t seed) {
        uint64_t x = seed;
        for (auto& word : state_) word = splitmix64(x);
    }
    uint64_t next_u64() {
        const uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }
    // uniform in [0, 1) with 53 random bits
    double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
    // uniform integer in [0, n)
    uint64_t below(uint64_t n) { return n == 0 ? 0 : next_u64() % n; }
    // standard normal (Box-Muller, one value per call)
    double normal() {
        double u1 = uniform();
        while (u1 <= 0.0) u1 = uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    // Fisher-Yates shuffle of n elements
    template <typename T>
    void shuffle(T* data, uint64_t n) {
        for (uint64_t i = n; i > 1; --i) {
            const uint64_t j = below(i);
            T tmp = data[i - 1];
            data[i - 1] = data[j];
            data[j] = tmp;
        }
    }

  private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static uint64_t splitmix64(uint64_t& x) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint64_t state_[4];
};

}  // namespace prophet
