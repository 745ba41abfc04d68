// op_tables.cpp: the cluster file's [ops] section (op_model.h's tables) read and written as TOML.
// Fields (docs/cluster.md): calibrated_on; stream_latency_us, stream_gbyte_s; attn_gflop_s; a2a_latency_us,
// a2a_gbyte_s; p2p_latency_us, p2p_gbyte_s; allreduce_latency_us, allreduce_gbyte_s; gemm_m (rows of every
// table), gemm_nk ([[N, K], ...] one pair per table), gemm_us (one list per table, one median time per M),
// gemm_op (optional, one "nn" | "nt" | "tn" per table, GemmOp; absent: every table "nn");
// scale (optional inline table: op kind -> factor, fit_op_scales); in_step_us (optional inline table:
// communication op kind -> microseconds per call, fit_in_step_overheads); link_message_us (optional, default 0) and
// attn_at (optional, [[C, NH, GFLOP/s], ...]: the attention rate at further shapes, --ops-shape).
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/error.h"
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

std::string toml_text(const toml::node& node) {
    std::ostringstream out;
    node.visit([&](const auto& n) { out << n; });
    return out.str();
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

// Table i of gemm_nk / gemm_us (and gemm_op when given) over the rows gemm_m.
GemmTable gemm_table(const toml::array& pair, const toml::array& times, const toml::array* gemm_ops, size_t i,
                     const std::vector<double>& rows, const std::string& path) {
    GemmTable g;
    if (gemm_ops) {
        const std::string op = (*gemm_ops)[i].value_or(std::string());
        if (op == "nt")
            g.op = GemmOp::kNT;
        else if (op == "tn")
            g.op = GemmOp::kTN;
        else if (op != "nn")
            throw_config_error("ops.gemm_op", "entry " + std::to_string(i) + " '" + op + "'",
                               "must be one of nn, nt, tn in " + path, "re-run the calibration");
    }
    const std::vector<double> shape = numbers(pair, "ops.gemm_nk", path);
    g.n = static_cast<int>(shape[0]);
    g.k = static_cast<int>(shape[1]);
    g.m = rows;
    for (double v : numbers(times, "ops.gemm_us", path)) g.seconds.push_back(v * 1e-6);
    if (g.seconds.size() != rows.size())
        throw_config_error("ops.gemm_us", "entry " + std::to_string(i) + " of " + std::to_string(g.seconds.size()),
                           "needs one time per gemm_m row (" + std::to_string(rows.size()) + ") in " + path,
                           "re-run the calibration");
    return g;
}

// ops.gemm_m, gemm_nk, gemm_us and gemm_op: one GEMM time table per (N, K) pair.
void read_gemm_tables(const toml::table& ops, const std::string& path, OpTables& t) {
    const toml::array* m = ops["gemm_m"].as_array();
    const toml::array* nk = ops["gemm_nk"].as_array();
    const toml::array* us = ops["gemm_us"].as_array();
    if (!m || !nk || !us || m->empty() || nk->empty())
        throw_config_error("ops.gemm_m", "(absent or empty)", "gemm_m, gemm_nk and gemm_us are required in " + path,
                           "re-run prophet profile --calibrate");
    const std::vector<double> rows = numbers(*m, "ops.gemm_m", path);
    for (size_t i = 1; i < rows.size(); ++i)
        if (rows[i] <= rows[i - 1])
            throw_config_error("ops.gemm_m", std::to_string(rows[i]), "must be strictly ascending in " + path,
                               "sort the rows");
    if (nk->size() != us->size())
        throw_config_error("ops.gemm_us", std::to_string(us->size()) + " lists",
                           "needs one list per gemm_nk pair (" + std::to_string(nk->size()) + ") in " + path,
                           "re-run the calibration");
    const toml::array* gemm_ops = ops["gemm_op"].as_array();
    if (gemm_ops && gemm_ops->size() != nk->size())
        throw_config_error("ops.gemm_op", std::to_string(gemm_ops->size()) + " entries",
                           "needs one op per gemm_nk pair (" + std::to_string(nk->size()) + ") in " + path,
                           "re-run the calibration");
    for (size_t i = 0; i < nk->size(); ++i) {
        const toml::array* pair = (*nk)[i].as_array();
        const toml::array* times = (*us)[i].as_array();
        if (!pair || pair->size() != 2 || !times)
            throw_config_error("ops.gemm_nk", "entry " + std::to_string(i), "must be [N, K] in " + path,
                               "e.g. gemm_nk = [[192, 64]]");
        t.gemms.push_back(gemm_table(*pair, *times, gemm_ops, i, rows, path));
    }
}

// ops.scale: recorded / modelled factor per op kind.
void read_scales(const toml::table& ops, const std::string& path, OpTables& t) {
    if (const toml::table* scale = ops["scale"].as_table()) {
        for (const auto& [kind, node] : *scale) {
            const auto v = node.value<double>();
            if (!v || *v <= 0)
                throw_config_error("ops.scale." + std::string(kind.str()), toml_text(node), "must be > 0 in " + path,
                                   "re-run prophet profile --calibrate");
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
                allowed += std::string(allowed.empty() ? "" : ", ") + prophet::op_kind_name(static_cast<prophet::OpKind>(k));
            }
        for (const auto& [kind, node] : *in_step) {
            const std::string name(kind.str());
            if (kinds.count(name) == 0)
                throw_config_error("ops.in_step_us." + name, toml_text(node),
                                   "is not a communication op kind in " + path, "one of " + allowed);
            const auto v = node.value<double>();
            if (!v || *v < 0)
                throw_config_error("ops.in_step_us." + name, toml_text(node), "must be a number >= 0 in " + path,
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
    read_gemm_tables(*ops, path, t);
    read_scales(*ops, path, t);
    read_in_step(*ops, path, t);
    return t;
}

namespace {

// gemm_m, gemm_nk, gemm_op and gemm_us lines.
void write_gemm_tables(std::ostringstream& out, const OpTables& t) {
    out << "gemm_m = [";
    const std::vector<double>& rows = t.gemms.empty() ? std::vector<double>{} : t.gemms[0].m;
    for (size_t i = 0; i < rows.size(); ++i) out << (i ? ", " : "") << rows[i];
    out << "]\ngemm_nk = [";
    for (size_t i = 0; i < t.gemms.size(); ++i) out << (i ? ", " : "") << "[" << t.gemms[i].n << ", " << t.gemms[i].k << "]";
    out << "]\ngemm_op = [";
    for (size_t i = 0; i < t.gemms.size(); ++i) out << (i ? ", " : "") << "\"" << gemm_op_name(t.gemms[i].op) << "\"";
    out << "]\ngemm_us = [";
    for (size_t i = 0; i < t.gemms.size(); ++i) {
        out << (i ? ",\n           [" : "[");
        for (size_t j = 0; j < t.gemms[i].seconds.size(); ++j) out << (j ? ", " : "") << t.gemms[i].seconds[j] * 1e6;
        out << "]";
    }
    out << "]\n";
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
    out << "\n# The per-op model's tables (lib/sim/op_model.h; docs/cluster.md): GEMM medians at the model's shapes,\n"
        << "# streaming and attention rates, all-to-all / point-to-point / ring all-reduce latency and bandwidth.\n";
    out << "[ops]\n";
    out << "calibrated_on = \"" << t.calibrated_on << "\"\n";
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
    write_gemm_tables(out, t);
    write_fitted(out, t);
    return out.str();
}

}  // namespace prophet::sim
