// fuzz_external_reply.cpp: libFuzzer target for the replies of a user's external policy process
// (`balance.policy = "external"`, docs/policies.md): parse_placement_reply (online, one layer) and
// parse_window_reply (offline, every layer). The process is the user's own code, so its lines are untrusted
// input like a file: every malformed reply must end in a prophet::Error, and an accepted one must be a placement
// the planners can use (each expert's owner among its holders, replicas within the cap).
// The input's first byte picks the shape (D = 1 + b % 4 devices, E = 1 + (b / 4) % 8 experts, a replica cap of
// (b / 32) % 3, 0 = none); the rest is the reply line, tried as both kinds with L = 2 layers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "balance/external_policy.h"
#include "balance/placement.h"
#include "core/error.h"

namespace {

// what the planners rely on in a placement: a finding (abort) where an accepted reply breaks it
void check(const prophet::Placement& p, int D, int E, int cap) {
    if (p.num_devices != D || p.num_experts != E || static_cast<int>(p.owner.size()) != E) std::abort();
    for (int e = 0; e < E; ++e)
        if (p.owner[e] < 0 || p.owner[e] >= D || !p.holds(e, p.owner[e])) std::abort();
    if (cap > 0)
        for (int replicas : p.replicas_per_device())
            if (replicas > cap) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const int D = 1 + data[0] % 4, E = 1 + (data[0] / 4) % 8, cap = (data[0] / 32) % 3;
    const std::string line(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        check(prophet::parse_placement_reply(line, D, E, cap, "fuzz"), D, E, cap);
    } catch (const prophet::Error&) {
    }
    try {
        const std::vector<prophet::Placement> layers = prophet::parse_window_reply(line, 2, D, E, cap, "fuzz");
        if (layers.size() != 2) std::abort();
        for (const prophet::Placement& p : layers) check(p, D, E, cap);
    } catch (const prophet::Error&) {
    }
    return 0;
}
