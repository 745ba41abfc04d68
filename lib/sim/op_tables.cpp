// op_tables.cpp: the cluster file's [ops] section (op_model.h's tables) read and written as TOML.
// Fields (docs/cluster.md): calibrated_on; stream_latency_us, stream_gbyte_s; attn_gflop_s; a2a_latency_us,
// a2a_gbyte_s; p2p_latency_us, p2p_gbyte_s; allreduce_latency_us, allreduce_gbyte_s; gemm_grid_m, gemm_grid_n,
// gemm_grid_k (the GEMM grid's axes, GemmGrid) and gemm_gflop_s_nn, _nt, _tn (per GemmOp the rate at every grid
// point, M-major, K fastest);
// scale (optional inline table: op kind -> factor, fit_op_scales); in_step_us (optional inline table:
// communication op kind -> microseconds per call, fit_in_step_overheads); link_message_us (optional, default 0) and
// attn_at (optional, [[C, NH, GFLOP/s], ...]: the attention rate at further shapes, --ops-shape);
// allreduce_sizes (optional, [[bytes, us], ...]: the all-reduce by size class) with allreduce_ranks.
#include <toml++/toml.h>
#include <optional>
#include <set>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/toml_text.h"
#include "sim/gemm_grid_passes.h"
#include "sim/op_model.h"

namespace prophet::sim {

namespace {

double positive(const toml::table& ops, const std::string& path, const char* key, bool allow_zero = false) {
    const auto v = ops[key].value<double>();
    if (!v)
        throw_config_error(std::string("ops.") + key, "(absent)", "is required in the [ops] section of " + path,
                           "re-run prophet profile --calibrate (it writes every [ops] field)");
    if (*v < 0 || (!allow_zero && *v == 0))
        throw_config_error(std::string("ops.") + key, std::to_string(*v),
                           std::string("must be ") + (allow_zero ? ">= 0" : "> 0") + " in " + path,
                           "re-run prophet profile --calibrate");
    return *v;
}

std::vector<double> numbers(const toml::array& a, const std::string& field, const std::string& path) {
    std::vector<double> out;
    for (const toml::node& x : a) {
        const auto v = x.value<double>();
        if (!v) throw_config_error(field, "a non-number", "must list numbers in " + path, "re-run the calibration");
        out.push_back(*v);
    }
    return out;
}

// ops.attn_at: the attention rate at further (C, NH) shapes.
void read_attn_at(const toml::table& ops, const std::string& path, OpTables& t) {
    if (const toml::array* attn = ops["attn_at"].as_array()) {
        for (size_t i = 0; i < attn->size(); ++i) {
            const toml::array* row = (*attn)[i].as_array();
            const std::vector<double> v = row ? numbers(*row, "ops.attn_at", path) : std::vector<double>{};
            if (v.size() != 3 || v[0] <= 0 || v[1] <= 0 || v[2] <= 0)
                throw_config_error("ops.attn_at", "entry " + std::to_string(i),
                                   "must be [C, NH, GFLOP/s] with every number > 0 in " + path,
                                   "e.g. attn_at = [[128, 8, 2.5]]");
            t.attn_flops_per_s_at[{static_cast<int>(v[0]), static_cast<int>(v[1])}] = v[2] * 1e9;
        }
    }
}

// ops.allreduce_sizes ([[bytes, us], ...], bytes strictly ascending and > 0, us >= 0) and ops.allreduce_ranks (the
// ranks they were measured on, >= 2): the all-reduce by size class; both absent in files older than it.
void read_allreduce_sizes(const toml::table& ops, const std::string& path, OpTables& t) {
    const toml::array* sizes = ops["allreduce_sizes"].as_array();
    if (sizes == nullptr) return;
    const auto ranks = ops["allreduce_ranks"].value<int64_t>();
    if (!ranks || *ranks < 2)
        throw_config_error("ops.allreduce_ranks", ranks ? std::to_string(*ranks) : "(absent)",
                           "must be the ranks (>= 2) ops.allreduce_sizes was measured on, in " + path,
                           "re-run prophet profile --calibrate");
    t.allreduce_ranks = static_cast<int>(*ranks);
    for (size_t i = 0; i < sizes->size(); ++i) {
        const toml::array* row = (*sizes)[i].as_array();
        const std::vector<double> v = row ? numbers(*row, "ops.allreduce_sizes", path) : std::vector<double>{};
        if (v.size() != 2 || v[0] <= 0 || v[1] < 0 || (i > 0 && v[0] <= t.allreduce_sizes_bytes.back()))
            throw_config_error("ops.allreduce_sizes", "entry " + std::to_string(i),
                               "must be [bytes, us] with bytes > 0 and ascending, us >= 0, in " + path,
                               "e.g. allreduce_sizes = [[4096, 30], [1048576, 900]]");
        t.allreduce_sizes_bytes.push_back(v[0]);
        t.allreduce_sizes_s.push_back(v[1] * 1e-6);
    }
}

// ops.<key>: a grid axis, strictly ascending and > 0.
std::vector<double> grid_axis(const toml::table& ops, const std::string& path, const char* key) {
    const toml::array* a = ops[key].as_array();
    if (!a || a->empty())
        throw_config_error(std::string("ops.") + key, "(absent or empty)",
                           "is required in the [ops] section of " + path,
                           "re-run prophet profile --calibrate (it writes the GEMM grid)");
    const std::vector<double> axis = numbers(*a, std::string("ops.") + key, path);
    for (size_t i = 0; i < axis.size(); ++i)
        if (axis[i] <= 0 || (i > 0 && axis[i] <= axis[i - 1]))
            throw_config_error(std::string("ops.") + key, std::to_string(axis[i]),
                               "must be > 0 and strictly ascending in " + path, "re-run prophet profile --calibrate");
    return axis;
}

// ops.gemm_grid_m, _n, _k and ops.gemm_gflop_s_<op> for every GemmOp: the GEMM rate grid.
void read_gemm_grid(const toml::table& ops, const std::string& path, OpTables& t) {
    GemmGrid& g = t.gemm;
    g.m = grid_axis(ops, path, "gemm_grid_m");
    g.n = grid_axis(ops, path, "gemm_grid_n");
    g.k = grid_axis(ops, path, "gemm_grid_k");
    const size_t points = g.m.size() * g.n.size() * g.k.size();
    for (const GemmOp op : {GemmOp::kNN, GemmOp::kNT, GemmOp::kTN}) {
        const std::string key = std::string("gemm_gflop_s_") + gemm_op_name(op);
        const toml::array* a = ops[key].as_array();
        const std::vector<double> rates = a ? numbers(*a, "ops." + key, path) : std::vector<double>{};
        if (rates.size() != points)
            throw_config_error(
                "ops." + key, std::to_string(rates.size()) + " numbers",
                "needs one rate per grid point (" + std::to_string(points) + " = gemm_grid_m x n x k) in " + path,
                "re-run prophet profile --calibrate");
        for (const double r : rates)
            if (r <= 0)
                throw_config_error("ops." + key, std::to_string(r), "must list rates > 0 in " + path,
                                   "re-run prophet profile --calibrate");
        std::vector<double>& out = g.flops_per_s[static_cast<size_t>(op)];
        for (const double r : rates) out.push_back(r * 1e9);
    }
    if (const toml::node* passes = ops.get("gemm_grid_passes")) {
        const std::optional<int64_t> v = passes->value<int64_t>();
        if (!passes->is_integer() || !v || !gemm_grid_passes_allowed(*v))
            throw_config_error("ops.gemm_grid_passes", toml_node_text(*passes), gemm_grid_passes_rule() + " in " + path,
                               "re-run prophet profile --calibrate");
        g.passes = static_cast<int>(*v);
    }
}

// ops.scale: recorded / modelled factor per op kind.
void read_scales(const toml::table& ops, const std::string& path, OpTables& t) {
    if (const toml::table* scale = ops["scale"].as_table()) {
        for (const auto& [kind, node] : *scale) {
            const auto v = node.value<double>();
            if (!v || *v <= 0)
                throw_config_error("ops.scale." + std::string(kind.str()), toml_node_text(node),
                                   "must be > 0 in " + path, "re-run prophet profile --calibrate");
            t.scale[std::string(kind.str())] = *v;
        }
    }
}

// ops.in_step_us: microseconds added per call of a communication op kind.
void read_in_step(const toml::table& ops, const std::string& path, OpTables& t) {
    if (const toml::table* in_step = ops["in_step_us"].as_table()) {
        std::set<std::string> kinds;  // the names is_in_step_kind accepts
        std::string allowed;
        for (int k = 0; k < static_cast<int>(prophet::OpKind::kCount); ++k)
            if (is_in_step_kind(static_cast<prophet::OpKind>(k))) {
                kinds.insert(prophet::op_kind_name(static_cast<prophet::OpKind>(k)));
                allowed +=
                    std::string(allowed.empty() ? "" : ", ") + prophet::op_kind_name(static_cast<prophet::OpKind>(k));
            }
        for (const auto& [kind, node] : *in_step) {
            const std::string name(kind.str());
            if (kinds.count(name) == 0)
                throw_config_error("ops.in_step_us." + name, toml_node_text(node),
                                   "is not a communication op kind in " + path, "one of " + allowed);
            const auto v = node.value<double>();
            if (!v || *v < 0)
                throw_config_error("ops.in_step_us." + name, toml_node_text(node), "must be a number >= 0 in " + path,
                                   "re-run prophet profile --calibrate");
            t.in_step_s[name] = *v * 1e-6;
        }
    }
}

}  // namespace

OpTables load_op_tables(const std::string& path) {
    toml::table file;
    try {
        file = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        throw_input_error(path, std::string("cannot read the cluster file: ") + std::string(e.description()),
                          "check the path and the TOML syntax");
    }
    const toml::table* ops = file["ops"].as_table();
    if (ops == nullptr)
        throw_input_error(
            path, "has no [ops] section (the per-op model's tables)",
            "calibrate it: mpirun -np 2 prophet profile --config CONFIG --calibrate --cluster-out " + path);
    OpTables t;
    t.calibrated_on = (*ops)["calibrated_on"].value_or(std::string());
    t.stream_latency_s = positive(*ops, path, "stream_latency_us", true) * 1e-6;
    t.stream_bytes_per_s = positive(*ops, path, "stream_gbyte_s") * 1e9;
    t.attn_flops_per_s = positive(*ops, path, "attn_gflop_s") * 1e9;
    t.a2a_latency_s = positive(*ops, path, "a2a_latency_us", true) * 1e-6;
    t.a2a_bytes_per_s = positive(*ops, path, "a2a_gbyte_s") * 1e9;
    t.p2p_latency_s = positive(*ops, path, "p2p_latency_us", true) * 1e-6;
    t.p2p_bytes_per_s = positive(*ops, path, "p2p_gbyte_s") * 1e9;
    t.allreduce_latency_s = positive(*ops, path, "allreduce_latency_us", true) * 1e-6;
    t.allreduce_bytes_per_s = positive(*ops, path, "allreduce_gbyte_s") * 1e9;
    if (const auto v = (*ops)["link_message_us"].value<double>()) {
        if (*v < 0)
            throw_config_error("ops.link_message_us", std::to_string(*v), "must be >= 0 in " + path,
                               "re-run prophet profile --calibrate");
        t.link_message_s = *v * 1e-6;
    }
    read_attn_at(*ops, path, t);
    read_allreduce_sizes(*ops, path, t);
    read_gemm_grid(*ops, path, t);
    read_scales(*ops, path, t);
    read_in_step(*ops, path, t);
    return t;
}

namespace {

// The GEMM grid: its axes, then per GemmOp the rates (GFLOP/s), one line per M.
void write_gemm_grid(std::ostringstream& out, const OpTables& t) {
    const GemmGrid& g = t.gemm;
    const auto list = [&](const std::vector<double>& v, size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) out << (i > from ? ", " : "") << v[i];
    };
    out << "gemm_grid_m = [";
    list(g.m, 0, g.m.size());
    out << "]\ngemm_grid_n = [";
    list(g.n, 0, g.n.size());
    out << "]\ngemm_grid_k = [";
    list(g.k, 0, g.k.size());
    out << "]\n";
    if (g.passes > 0) out << "gemm_grid_passes = " << g.passes << "\n";
    const size_t row = g.n.size() * g.k.size();
    for (const GemmOp op : {GemmOp::kNN, GemmOp::kNT, GemmOp::kTN}) {
        std::vector<double> gflop_s = g.flops_per_s[static_cast<size_t>(op)];
        for (double& r : gflop_s) r *= 1e-9;
        out << "gemm_gflop_s_" << gemm_op_name(op) << " = [";
        for (size_t i = 0; i < g.m.size(); ++i) {
            out << (i ? ",\n    " : "\n    ");
            list(gflop_s, i * row, (i + 1) * row);
        }
        out << "]\n";
    }
}

// The fitted corrections: scale and in_step_us, each only when there is one.
void write_fitted(std::ostringstream& out, const OpTables& t) {
    if (!t.scale.empty()) {
        out << "# recorded / modelled own time per op kind on the calibration run's own steps (fit_op_scales)\n";
        out << "scale = {";
        bool first = true;
        for (const auto& [kind, v] : t.scale) {
            out << (first ? " " : ", ") << kind << " = " << v;
            first = false;
        }
        out << " }\n";
    }
    if (!t.in_step_s.empty()) {
        out << "# microseconds added per call of a communication kind: recorded - modelled own time per call on the\n"
            << "# calibration run's own steps, median over steps (fit_in_step_overheads; the early ranks' poll wake-up)\n";
        out << "in_step_us = {";
        bool first = true;
        for (const auto& [kind, v] : t.in_step_s) {
            out << (first ? " " : ", ") << kind << " = " << v * 1e6;
            first = false;
        }
        out << " }\n";
    }
}

}  // namespace

std::string op_tables_to_toml(const OpTables& t) {
    std::ostringstream out;
    out.precision(6);
    out << "\n# The per-op model's tables (lib/sim/op_model.h; docs/cluster.md): the GEMM FLOP rate per op on a grid of\n"
        << "# (M, N, K) (gemm_gflop_s_<op>: M-major, one line per M, K fastest), streaming and attention rates,\n"
        << "# all-to-all / point-to-point / ring all-reduce latency and bandwidth.\n";
    out << "[ops]\n";
    out << "calibrated_on = " << value_to_toml(Value(t.calibrated_on)) << "\n";  // escaped (a sweep's names)
    out << "stream_latency_us = " << t.stream_latency_s * 1e6 << "\n";
    out << "stream_gbyte_s = " << t.stream_bytes_per_s * 1e-9 << "\n";
    out << "attn_gflop_s = " << t.attn_flops_per_s * 1e-9 << "\n";
    out << "a2a_latency_us = " << t.a2a_latency_s * 1e6 << "\n";
    out << "a2a_gbyte_s = " << t.a2a_bytes_per_s * 1e-9 << "\n";
    out << "p2p_latency_us = " << t.p2p_latency_s * 1e6 << "\n";
    out << "p2p_gbyte_s = " << t.p2p_bytes_per_s * 1e-9 << "\n";
    out << "allreduce_latency_us = " << t.allreduce_latency_s * 1e6 << "\n";
    out << "allreduce_gbyte_s = " << t.allreduce_bytes_per_s * 1e-9 << "\n";
    out << "link_message_us = " << t.link_message_s * 1e6 << "\n";
    if (!t.attn_flops_per_s_at.empty()) {
        out << "attn_at = [";
        bool first = true;
        for (const auto& [shape, rate] : t.attn_flops_per_s_at) {
            out << (first ? "" : ", ") << "[" << shape.first << ", " << shape.second << ", " << rate * 1e-9 << "]";
            first = false;
        }
        out << "]\n";
    }
    if (!t.allreduce_sizes_bytes.empty()) {
        out << "# the float all-reduce by message size on allreduce_ranks ranks: [bytes, us per call]\n";
        out << "allreduce_ranks = " << t.allreduce_ranks << "\nallreduce_sizes = [";
        for (size_t i = 0; i < t.allreduce_sizes_bytes.size(); ++i)
            out << (i ? ", " : "") << "[" << static_cast<long long>(t.allreduce_sizes_bytes[i]) << ", "
                << t.allreduce_sizes_s[i] * 1e6 << "]";
        out << "]\n";
    }
    write_gemm_grid(out, t);
    write_fitted(out, t);
    return out.str();
}

}  // namespace prophet::sim
