#include "balance/cluster.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <toml++/toml.h>

#include "core/error.h"

namespace prophet {
namespace {

constexpr double kGbit = 1e9 / 8.0;  // bytes per second in one Gbit/s

}  // namespace

const Schema& cluster_schema() {
    static const Schema schema = [] {
        Schema s;
        s.add_string("cluster.name", "unnamed", {}, "label used in reports");
        s.add_required("cluster.num_devices", ValueType::kInt, 1, 65536, "D: expert-parallel devices (ranks)");
        s.add_int("cluster.devices_per_node", 1, 1, 65536, "devices sharing one node (intra-node links)");
        s.add_required("cluster.compute_tflop_s", ValueType::kFloat, 0, std::nullopt,
                       "t: sustained expert-GEMM throughput of one device, TFLOP/s", true);
        s.add_required("cluster.a2a_gbit_s", ValueType::kFloatList, 0, std::nullopt,
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
        s.add_required("cluster.trans_gbit_s", ValueType::kFloat, 0, std::nullopt,
                       "Trans (parameter broadcast) bandwidth B̄, Gbit/s", true);
        s.add_float("cluster.agg_gbit_s", -1.0, -1.0, 1e6, "Agg (gradient reduce) bandwidth, Gbit/s (-1: trans_gbit_s)");
        s.add_float("cluster.intra_node_gbit_s", -1.0, -1.0, 1e7,
                    "topology: per-pair bandwidth inside a node, Gbit/s (-1: largest a2a step)");
        s.add_float("cluster.inter_node_gbit_s", -1.0, -1.0, 1e7,
                    "topology: per-pair bandwidth across nodes, Gbit/s (-1: largest a2a step)");
        s.add_float("cluster.node_nic_gbit_s", 0.0, 0.0, 1e7,
                    "topology: a node's network interface, shared by its inter-node traffic, Gbit/s (0: no limit)");
        s.add_float("cluster.fnec_ms", -1.0, -1.0, 1e7,
                    "measured forward non-expert time of one block, ms (-1: estimate from model dims)");
        s.add_float("cluster.bnec_ms", -1.0, -1.0, 1e7, "measured backward non-expert time of one block, ms (-1: 2x FNEC)");
        s.add_float("cluster.step_tail_ms", -1.0, -1.0, 1e7,
                    "measured per-step time after the last backward block: dense-gradient all-reduce, gradient norm, "
                    "optimizer, ms (-1: not modelled)");
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
    return node_of(src) == node_of(dst) ? intra_node_bytes_per_s : inter_node_bytes_per_s;
}

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
    const double agg = config.get_float("cluster.agg_gbit_s");
    c.agg_bytes_per_s = agg > 0 ? agg * kGbit : c.trans_bytes_per_s;
    const double fastest = gbit.back() * kGbit;
    const double intra = config.get_float("cluster.intra_node_gbit_s");
    const double inter = config.get_float("cluster.inter_node_gbit_s");
    c.intra_node_bytes_per_s = intra > 0 ? intra * kGbit : fastest;
    c.inter_node_bytes_per_s = inter > 0 ? inter * kGbit : fastest;
    c.node_nic_bytes_per_s = config.get_float("cluster.node_nic_gbit_s") * kGbit;
    const double fnec_ms = config.get_float("cluster.fnec_ms");
    const double bnec_ms = config.get_float("cluster.bnec_ms");
    c.fnec_s = fnec_ms >= 0 ? fnec_ms * 1e-3 : -1;
    c.bnec_s = bnec_ms >= 0 ? bnec_ms * 1e-3 : -1;
    const double tail_ms = config.get_float("cluster.step_tail_ms");
    c.step_tail_s = tail_ms >= 0 ? tail_ms * 1e-3 : -1;
    if (c.num_devices % c.devices_per_node != 0)
        throw_config_error("cluster.devices_per_node", std::to_string(c.devices_per_node),
                           "must divide cluster.num_devices = " + std::to_string(c.num_devices) + " (" + origin + ")",
                           "use a divisor of " + std::to_string(c.num_devices));
    return c;
}

ClusterSpec load_cluster_file(const std::string& path) {
    Config config(cluster_schema(), "cluster file " + path);
    // [ops] holds the per-op model's tables (lib/sim/op_model.h reads them), not cluster keys: merged without it
    toml::table table;
    try {
        table = toml::parse_file(path);
    } catch (const toml::parse_error&) {
        config.merge_toml_file(path);  // throws the input error that names the line (or the missing file)
    }
    table.erase("ops");
    std::ostringstream text;
    text << table;
    config.merge_toml_string(text.str(), path);
    return cluster_from_config(config, path);
}

std::string cluster_to_toml(const ClusterSpec& c) {
    std::ostringstream out;
    out.precision(6);
    out << "[cluster]\n";
    out << "name = \"" << c.name << "\"\n";
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
    out << "agg_gbit_s = " << c.agg_bytes_per_s / kGbit << "\n";
    out << "intra_node_gbit_s = " << c.intra_node_bytes_per_s / kGbit << "\n";
    out << "inter_node_gbit_s = " << c.inter_node_bytes_per_s / kGbit << "\n";
    out << "node_nic_gbit_s = " << c.node_nic_bytes_per_s / kGbit << "\n";
    out << "fnec_ms = " << (c.fnec_s >= 0 ? c.fnec_s * 1e3 : -1.0) << "\n";
    out << "bnec_ms = " << (c.bnec_s >= 0 ? c.bnec_s * 1e3 : -1.0) << "\n";
    out << "step_tail_ms = " << (c.step_tail_s >= 0 ? c.step_tail_s * 1e3 : -1.0) << "\n";
    return out.str();
}

}  // namespace prophet
