// traffic.cpp: gathering the per-peer byte counters into rank-pair and host-pair totals (traffic.h).
#include "train/traffic.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace prophet {

std::vector<std::string> gather_host_names(Communicator& comm) {
    constexpr size_t kName = 64;  // host names longer than 63 bytes are cut (only compared, never resolved)
    char name[kName] = {0};
    gethostname(name, kName - 1);
    std::vector<char> names(kName * comm.size(), 0);
    comm.all_gather(name, kName, names.data());
    std::vector<std::string> hosts;
    for (int r = 0; r < comm.size(); ++r) {
        const char* at = names.data() + kName * r;
        hosts.emplace_back(at, strnlen(at, kName));
    }
    return hosts;
}

std::vector<int> gather_rank_hosts(Communicator& comm) {
    const std::vector<std::string> names = gather_host_names(comm);
    std::vector<int> host(names.size());
    for (size_t r = 0; r < names.size(); ++r)
        host[r] = static_cast<int>(std::find(names.begin(), names.end(), names[r]) - names.begin());
    return host;
}

Traffic gather_traffic(Communicator& comm, const std::vector<uint64_t>& sent_bytes) {
    const int D = comm.size();
    Traffic t;
    t.peer_bytes.assign(static_cast<size_t>(D) * D, 0);
    comm.all_gather(sent_bytes.data(), sizeof(uint64_t) * D, t.peer_bytes.data());
    t.hosts = gather_host_names(comm);
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d)
            if (t.hosts[s] != t.hosts[d]) t.cross_host_bytes += t.peer_bytes[static_cast<size_t>(s) * D + d];
    return t;
}

nlohmann::json traffic_json(const Traffic& t) {
    const int D = static_cast<int>(t.hosts.size());
    nlohmann::json peers = nlohmann::json::array();
    std::map<std::pair<std::string, std::string>, uint64_t> by_hosts;
    for (int s = 0; s < D; ++s) {
        nlohmann::json row = nlohmann::json::array();
        for (int d = 0; d < D; ++d) {
            const uint64_t b = t.peer_bytes[static_cast<size_t>(s) * D + d];
            row.push_back(b);
            if (t.hosts[s] != t.hosts[d] && b > 0) by_hosts[{t.hosts[s], t.hosts[d]}] += b;
        }
        peers.push_back(row);
    }
    nlohmann::json host_bytes = nlohmann::json::array();
    for (const auto& [pair, bytes] : by_hosts)
        host_bytes.push_back({{"src", pair.first}, {"dst", pair.second}, {"bytes", bytes}});
    return {{"hosts", t.hosts},
            {"peer_bytes", peers},
            {"host_bytes", host_bytes},
            {"cross_host_bytes", t.cross_host_bytes}};
}

}  // namespace prophet
