#include "balance/cluster.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/config.h"
#include "core/error.h"

namespace prophet {
namespace {

constexpr double kGbit = 1e9 / 8.0;  // bytes per second in one Gbit/s

constexpr double kMaxGbit = 1e7;  // the largest rate a cluster file may give, Gbit/s (10 Pbit/s)

// the devices, their compute, and the bandwidths of Eqs 1, 4 and 5 (all-to-all steps, Trans, Agg)
void add_device_and_bandwidth_keys(Schema& s) {
    s.add_string("cluster.name", "unnamed", {}, "label used in reports");
    s.add_required("cluster.num_devices", ValueType::kInt, 1, 65536, "D: expert-parallel devices (ranks)");
    s.add_int("cluster.devices_per_node", 1, 1, 65536, "devices sharing one node (intra-node links)");
    s.add_required("cluster.compute_tflop_s", ValueType::kFloat, 0, std::nullopt,
                   "t: sustained expert-GEMM throughput of one device, TFLOP/s", true);
    // every rate is at most kMaxGbit: a key that defaults to another (agg_gbit_s to trans_gbit_s, the pair
    // bandwidths to the largest a2a step) must read back what cluster_to_toml writes for it (fuzz_cluster)
    s.add_required("cluster.a2a_gbit_s", ValueType::kFloatList, 0, kMaxGbit,
                   "all-to-all bandwidth per device by message size, Gbit/s (one value per size step)", true);
    KeySpec steps;
    steps.key = "cluster.a2a_max_message_kib";
    steps.type = ValueType::kFloatList;
    steps.default_value = std::vector<double>{};
    steps.min = 0;
    steps.min_exclusive = true;
    steps.help = "upper message size (KiB) of every a2a_gbit_s step but the last (ascending)";
    s.add(steps);
    s.add_float("cluster.a2a_latency_us", 0.0, 0.0, 1e6, "fixed latency added to each all-to-all, us");
    s.add_required("cluster.trans_gbit_s", ValueType::kFloat, 0, kMaxGbit,
                   "Trans (parameter broadcast) bandwidth B̄, Gbit/s", true);
    s.add_float("cluster.agg_gbit_s", -1.0, -1.0, kMaxGbit,
                "Agg (gradient reduce) bandwidth, Gbit/s (-1: trans_gbit_s; 0 is an error)");
}

// the topology-aware model's links, ports and latencies
void add_topology_keys(Schema& s) {
    s.add_float("cluster.intra_node_gbit_s", -1.0, -1.0, kMaxGbit,
                "topology: per-pair bandwidth inside a node, Gbit/s (-1: largest a2a step; 0 is an error)");
    s.add_float("cluster.inter_node_gbit_s", -1.0, -1.0, kMaxGbit,
                "topology: per-pair bandwidth across nodes, Gbit/s (-1: largest a2a step; 0 is an error)");
    s.add_float("cluster.node_nic_gbit_s", 0.0, 0.0, kMaxGbit,
                "topology: each network interface of a node, shared by the inter-node traffic of the devices on "
                "its rail, Gbit/s per direction (0: no limit)");
    s.add_int("cluster.nics_per_node", 1, 1, 65536,
              "topology: NICs (rails) per node; device with local index l uses NIC l * nics / devices_per_node");
    s.add_int("cluster.nvlink_domain", 1, 1, 65536,
              "topology: devices per NVLink domain (2: bridged pairs, devices_per_node: NVSwitch; 1: no NVLink)");
    s.add_float("cluster.nvlink_gbit_s", 0.0, 0.0, kMaxGbit,
                "topology: a device's NVLink port, per direction, Gbit/s (needed when nvlink_domain > 1)");
    s.add_float("cluster.pcie_gbit_s", 0.0, 0.0, kMaxGbit,
                "topology: a device's host (PCIe) port per direction, carrying its intra-node traffic outside "
                "its NVLink domain and its inter-node traffic, Gbit/s (0: no limit)");
    s.add_float("cluster.gpu_injection_gbit_s", 0.0, 0.0, kMaxGbit,
                "topology: a device's total egress over every link class, Gbit/s (0: no limit)");
    s.add_float("cluster.gpu_ejection_gbit_s", -1.0, -1.0, kMaxGbit,
                "topology: a device's total ingress over every link class, Gbit/s (-1: gpu_injection_gbit_s)");
    s.add_float("cluster.nvlink_latency_us", 0.0, 0.0, 1e6,
                "topology: latency added to a collective that moves bytes over NVLink, us");
    s.add_float("cluster.intra_node_latency_us", 0.0, 0.0, 1e6,
                "topology: latency added to a collective that moves bytes between PCIe peers of a node, us");
    s.add_float("cluster.inter_node_latency_us", 0.0, 0.0, 1e6,
                "topology: latency added to a collective that moves bytes across nodes, us");
}

// the model choice, the Trans/Agg collective and the measured times that override estimates
void add_collective_and_timing_keys(Schema& s) {
    s.add_bool("cluster.topology", false,
               "use the topology-aware model by default (default: true when the file sets nvlink_domain, "
               "nvlink_gbit_s, pcie_gbit_s, gpu_injection_gbit_s, gpu_ejection_gbit_s or nics_per_node)");
    s.add_string("cluster.trans_broadcast", "star", {"star", "chain"},
                 "the Trans/Agg collective of the systems on this cluster, the default of plan.trans_broadcast: "
                 "star = the home sends to each receiver (prophet train), chain = NCCL's pipelined ring "
                 "broadcast/reduce (the papers' code), each device forwarding at most trans_gbit_s / agg_gbit_s");
    s.add_float("cluster.fnec_ms", -1.0, -1.0, 1e7,
                "measured forward non-expert time of one block, ms (-1: estimate from model dims)");
    s.add_float("cluster.bnec_ms", -1.0, -1.0, 1e7, "measured backward non-expert time of one block, ms (-1: 2x FNEC)");
    s.add_float("cluster.step_tail_ms", -1.0, -1.0, 1e7,
                "measured per-step time after the last backward block: dense-gradient all-reduce, gradient norm, "
                "optimizer, ms (-1: not modelled)");
    s.add_float("cluster.memory_gbyte_s", 0.0, 0.0, 1e6,
                "memory bandwidth of one device, GB/s (10^9 bytes/s), for the simulator's streaming ops: "
                "layernorms, softmax, embedding, optimizer (0: not given, they take no time)");
}

}  // namespace

const Schema& cluster_schema() {
    static const Schema schema = [] {
        Schema s;
        add_device_and_bandwidth_keys(s);
        add_topology_keys(s);
        add_collective_and_timing_keys(s);
        s.add_string("cluster.source", "", {}, "where the numbers come from (paper, code constant, calibration)");
        return s;
    }();
    return schema;
}

double ClusterSpec::a2a_bytes_per_s(double max_message_bytes) const {
    for (const BandwidthStep& step : a2a_bandwidth)
        if (max_message_bytes <= step.max_message_bytes) return step.bytes_per_s;
    return a2a_bandwidth.back().bytes_per_s;
}

double ClusterSpec::link_bytes_per_s(int src, int dst) const {
    switch (link_class(src, dst)) {
        case LinkClass::kNvlink: return nvlink_bytes_per_s;
        case LinkClass::kIntraNode: return intra_node_bytes_per_s;
        case LinkClass::kInterNode: break;
    }
    return inter_node_bytes_per_s;
}

double ClusterSpec::link_latency_s(LinkClass c) const {
    switch (c) {
        case LinkClass::kNvlink: return nvlink_latency_s;
        case LinkClass::kIntraNode: return intra_node_latency_s;
        case LinkClass::kInterNode: break;
    }
    return inter_node_latency_s;
}

namespace {

// The topology keys of a cluster file: a file that sets any of them describes its topology (docs/cluster.md).
bool describes_topology(const Config& config) {
    for (const char* key : {"cluster.nvlink_domain", "cluster.nvlink_gbit_s", "cluster.pcie_gbit_s",
                            "cluster.gpu_injection_gbit_s", "cluster.gpu_ejection_gbit_s", "cluster.nics_per_node"})
        if (config.has(key)) return true;
    return false;
}

// A bandwidth whose -1 means a default (`meaning`): any other value must be a rate > 0. 0 Gbit/s is no link at
// all, never a silent "use the default".
double rate_or_default(const Config& config, const char* key, const std::string& meaning, const std::string& origin) {
    const double gbit = config.get_float(key);
    if (gbit == -1.0 || gbit > 0) return gbit;
    const std::string name = std::string(key).substr(std::string("cluster.").size());
    throw_config_error(
        key, value_to_toml(gbit), "must be > 0 Gbit/s, or -1 for " + meaning + " (" + origin + ")",
        "write the link's bandwidth, e.g. " + name + " = 100.0, or -1 (or leave " + name + " out) for " + meaning);
}

void read_topology(const Config& config, const std::string& origin, ClusterSpec& c) {
    c.topology = config.has("cluster.topology") ? config.get_bool("cluster.topology") : describes_topology(config);
    c.chain_broadcast = config.get_string("cluster.trans_broadcast") == "chain";
    c.nics_per_node = static_cast<int>(config.get_int("cluster.nics_per_node"));
    c.nvlink_domain = static_cast<int>(config.get_int("cluster.nvlink_domain"));
    c.nvlink_bytes_per_s = config.get_float("cluster.nvlink_gbit_s") * kGbit;
    c.pcie_bytes_per_s = config.get_float("cluster.pcie_gbit_s") * kGbit;
    c.gpu_injection_bytes_per_s = config.get_float("cluster.gpu_injection_gbit_s") * kGbit;
    const double ejection = config.get_float("cluster.gpu_ejection_gbit_s");
    c.gpu_ejection_bytes_per_s = ejection >= 0 ? ejection * kGbit : c.gpu_injection_bytes_per_s;
    c.nvlink_latency_s = config.get_float("cluster.nvlink_latency_us") * 1e-6;
    c.intra_node_latency_s = config.get_float("cluster.intra_node_latency_us") * 1e-6;
    c.inter_node_latency_s = config.get_float("cluster.inter_node_latency_us") * 1e-6;
    if (c.nics_per_node > c.devices_per_node)
        throw_config_error("cluster.nics_per_node", std::to_string(c.nics_per_node),
                           "exceeds devices_per_node = " + std::to_string(c.devices_per_node) + " (" + origin + ")",
                           "use at most one NIC (rail) per device");
    if (c.devices_per_node % c.nvlink_domain != 0)
        throw_config_error("cluster.nvlink_domain", std::to_string(c.nvlink_domain),
                           "must divide devices_per_node = " + std::to_string(c.devices_per_node) + " (" + origin + ")",
                           "use 1 (no NVLink), 2 (bridged pairs) or devices_per_node (NVSwitch)");
    if (c.nvlink_domain > 1 && c.nvlink_bytes_per_s <= 0)
        throw_config_error("cluster.nvlink_gbit_s", "0",
                           "must be > 0 when nvlink_domain = " + std::to_string(c.nvlink_domain) + " (" + origin + ")",
                           "give the NVLink bandwidth of one device per direction, e.g. nvlink_gbit_s = 2960.0");
}

}  // namespace

ClusterSpec cluster_from_config(const Config& config, const std::string& origin) {
    config.check_required();
    ClusterSpec c;
    c.name = config.get_string("cluster.name");
    c.num_devices = static_cast<int>(config.get_int("cluster.num_devices"));
    c.devices_per_node = static_cast<int>(config.get_int("cluster.devices_per_node"));
    c.compute_flops = config.get_float("cluster.compute_tflop_s") * 1e12;
    const std::vector<double>& gbit = config.get_float_list("cluster.a2a_gbit_s");
    const std::vector<double>& kib = config.get_float_list("cluster.a2a_max_message_kib");
    if (gbit.empty())
        throw_config_error("cluster.a2a_gbit_s", "[]", "needs at least one bandwidth (" + origin + ")",
                           "e.g. a2a_gbit_s = [100.0]");
    if (kib.size() + 1 != gbit.size())
        throw_config_error("cluster.a2a_max_message_kib", value_to_toml(kib),
                           "must list one size fewer than a2a_gbit_s has bandwidths (" + std::to_string(gbit.size()) +
                               " bandwidths need " + std::to_string(gbit.size() - 1) + " sizes) in " + origin,
                           "give the upper message size of every bandwidth step but the last");
    for (size_t i = 1; i < kib.size(); ++i)
        if (kib[i] <= kib[i - 1])
            throw_config_error("cluster.a2a_max_message_kib", value_to_toml(kib), "must be strictly ascending",
                               "sort the sizes");
    for (size_t i = 0; i < gbit.size(); ++i)
        c.a2a_bandwidth.push_back(BandwidthStep{
            i < kib.size() ? kib[i] * 1024.0 : std::numeric_limits<double>::infinity(), gbit[i] * kGbit});
    c.a2a_latency_s = config.get_float("cluster.a2a_latency_us") * 1e-6;
    c.trans_bytes_per_s = config.get_float("cluster.trans_gbit_s") * kGbit;
    const double agg = rate_or_default(config, "cluster.agg_gbit_s", "trans_gbit_s", origin);
    c.agg_bytes_per_s = agg > 0 ? agg * kGbit : c.trans_bytes_per_s;
    const double fastest = gbit.back() * kGbit;
    const double intra = rate_or_default(config, "cluster.intra_node_gbit_s", "the largest a2a_gbit_s", origin);
    const double inter = rate_or_default(config, "cluster.inter_node_gbit_s", "the largest a2a_gbit_s", origin);
    c.intra_node_bytes_per_s = intra > 0 ? intra * kGbit : fastest;
    c.inter_node_bytes_per_s = inter > 0 ? inter * kGbit : fastest;
    c.node_nic_bytes_per_s = config.get_float("cluster.node_nic_gbit_s") * kGbit;
    const double fnec_ms = config.get_float("cluster.fnec_ms");
    const double bnec_ms = config.get_float("cluster.bnec_ms");
    c.fnec_s = fnec_ms >= 0 ? fnec_ms * 1e-3 : -1;
    c.bnec_s = bnec_ms >= 0 ? bnec_ms * 1e-3 : -1;
    c.memory_bytes_per_s = config.get_float("cluster.memory_gbyte_s") * 1e9;
    const double tail_ms = config.get_float("cluster.step_tail_ms");
    c.step_tail_s = tail_ms >= 0 ? tail_ms * 1e-3 : -1;
    if (c.num_devices % c.devices_per_node != 0)
        throw_config_error("cluster.devices_per_node", std::to_string(c.devices_per_node),
                           "must divide cluster.num_devices = " + std::to_string(c.num_devices) + " (" + origin + ")",
                           "use a divisor of " + std::to_string(c.num_devices));
    read_topology(config, origin, c);
    return c;
}

ClusterSpec load_cluster_file(const std::string& path) {
    Config config(cluster_schema(), "cluster file " + path);
    // [ops] holds the per-op model's tables (lib/sim/op_model.h reads them), not cluster keys: merged without it
    // (read as parsed, not re-printed: toml++ 3.3's printer has undefined behaviour on some numbers, found by
    // fuzz_cluster)
    config.merge_toml_file(path, {"ops"});
    return cluster_from_config(config, path);
}

ClusterSpec load_cluster_text(const std::string& text, const std::string& origin) {
    Config config(cluster_schema(), "cluster file " + origin);
    config.merge_toml_string(text, origin, {"ops"});
    return cluster_from_config(config, origin);
}

std::string cluster_to_toml(const ClusterSpec& c) {
    std::ostringstream out;
    out.precision(6);
    out << "[cluster]\n";
    out << "name = " << value_to_toml(Value(c.name)) << "\n";  // escaped: any name reads back as itself
    out << "num_devices = " << c.num_devices << "\n";
    out << "devices_per_node = " << c.devices_per_node << "\n";
    out << "compute_tflop_s = " << c.compute_flops / 1e12 << "\n";
    out << "a2a_gbit_s = [";
    for (size_t i = 0; i < c.a2a_bandwidth.size(); ++i) out << (i ? ", " : "") << c.a2a_bandwidth[i].bytes_per_s / kGbit;
    out << "]\n";
    out << "a2a_max_message_kib = [";
    for (size_t i = 0; i + 1 < c.a2a_bandwidth.size(); ++i)
        out << (i ? ", " : "") << c.a2a_bandwidth[i].max_message_bytes / 1024.0;
    out << "]\n";
    out << "a2a_latency_us = " << c.a2a_latency_s * 1e6 << "\n";
    out << "trans_gbit_s = " << c.trans_bytes_per_s / kGbit << "\n";
    // -1 (the default) where no rate was measured: 0 would not read back (rate_or_default)
    const auto rate = [](double bytes_per_s) { return bytes_per_s > 0 ? bytes_per_s / kGbit : -1.0; };
    out << "agg_gbit_s = " << rate(c.agg_bytes_per_s) << "\n";
    out << "intra_node_gbit_s = " << rate(c.intra_node_bytes_per_s) << "\n";
    out << "inter_node_gbit_s = " << rate(c.inter_node_bytes_per_s) << "\n";
    out << "node_nic_gbit_s = " << c.node_nic_bytes_per_s / kGbit << "\n";
    // the topology keys and the explicit flag: what is read back is what was written (topology = false keeps a
    // calibrated file on the flat model)
    out << "topology = " << (c.topology ? "true" : "false") << "\n";
    out << "trans_broadcast = \"" << (c.chain_broadcast ? "chain" : "star") << "\"\n";
    out << "nics_per_node = " << c.nics_per_node << "\n";
    out << "nvlink_domain = " << c.nvlink_domain << "\n";
    out << "nvlink_gbit_s = " << c.nvlink_bytes_per_s / kGbit << "\n";
    out << "pcie_gbit_s = " << c.pcie_bytes_per_s / kGbit << "\n";
    out << "gpu_injection_gbit_s = " << c.gpu_injection_bytes_per_s / kGbit << "\n";
    out << "gpu_ejection_gbit_s = " << c.gpu_ejection_bytes_per_s / kGbit << "\n";
    out << "nvlink_latency_us = " << c.nvlink_latency_s * 1e6 << "\n";
    out << "intra_node_latency_us = " << c.intra_node_latency_s * 1e6 << "\n";
    out << "inter_node_latency_us = " << c.inter_node_latency_s * 1e6 << "\n";
    out << "fnec_ms = " << (c.fnec_s >= 0 ? c.fnec_s * 1e3 : -1.0) << "\n";
    out << "bnec_ms = " << (c.bnec_s >= 0 ? c.bnec_s * 1e3 : -1.0) << "\n";
    out << "step_tail_ms = " << (c.step_tail_s >= 0 ? c.step_tail_s * 1e3 : -1.0) << "\n";
    out << "memory_gbyte_s = " << c.memory_bytes_per_s / 1e9 << "\n";
    return out.str();
}

}  // namespace prophet
