// traffic.h: where a run's expert-parallel bytes went: per rank pair and per host pair (the slow links between
// hosts), for `prophet train --json` (summary "traffic") and the run's "traffic" event. What is counted:
// comm/comm_counting.h (all-to-all token dispatch/combine and Trans/Agg; not the dense all-reduce).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm.h"

namespace prophet {

struct Traffic {
    std::vector<std::string> hosts;    // [D] host name of each rank (gethostname)
    std::vector<uint64_t> peer_bytes;  // [D*D] peer_bytes[src*D + dst]: bytes src sent to dst
    uint64_t cross_host_bytes = 0;     // sum over pairs on different hosts
};

// Collective: the host name of every rank (gethostname), [D].
std::vector<std::string> gather_host_names(Communicator& comm);
// Collective: [D] for every rank, the lowest rank on its host (equal exactly for ranks on the same host).
std::vector<int> gather_rank_hosts(Communicator& comm);

// Collective over comm: every rank passes its sent_bytes [D]; every rank gets the whole matrix.
Traffic gather_traffic(Communicator& comm, const std::vector<uint64_t>& sent_bytes);

// {"hosts": [...], "peer_bytes": [[...]] (row = sender), "host_bytes": [{"src", "dst", "bytes"}] for every ordered
//  pair of distinct hosts that exchanged bytes, in host order, "cross_host_bytes": N}
nlohmann::json traffic_json(const Traffic& traffic);

}  // namespace prophet
