// calibrate_pooled.cpp: validate_cluster = "calibrate" fits the per-op model's scale and in_step_us on several
// recordings of the calibration config, pooled, and rewrites the [ops] section of the calibrated cluster file.
//
// Why: one process's steps of the same config run up to ~7% faster or slower than another's on the suite's 2-core
// VMs (10 recordings of main-2rank with the gate's routing: median step 14.9-17.0 ms), and the calibration's scale
// (recorded / modelled own time per kind) inherits its one process's draw: four calibrations of the main job gave
// expert-forward scales 1.12-1.35 and replay errors of 2.2-14.4% on the same 20 runs. The median over the steps
// of several processes samples that spread instead of one draw.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "sim/op_model.h"
#include "sim/replay.h"
#include "store/store.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace {

// the file's text before its [ops] section (the comment op_tables_to_toml writes in front of it, or the header)
std::string text_before_ops(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(kExitResource, "cannot read the calibrated cluster file " + path);
    std::ostringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    size_t cut = s.find("\n# The per-op model's tables");
    if (cut == std::string::npos) cut = s.find("\n[ops]");
    if (cut == std::string::npos) throw Error(kExitResource, path + ": no [ops] section to re-fit");
    return s.substr(0, cut + 1);
}

}  // namespace

void refit_calibration_pooled(const std::string& store_path, const std::string& cluster_path,
                              const std::vector<std::string>& run_ids) {
    Store store = Store::open(store_path);
    std::vector<sim::RecordedRun> runs;
    for (const std::string& id : run_ids) runs.push_back(sim::load_recorded_run(store, id));
    std::vector<const sim::RecordedRun*> pooled;
    for (const sim::RecordedRun& r : runs) pooled.push_back(&r);
    const sim::OpTables tables = sim::load_op_tables(cluster_path);
    const sim::OpTables fitted = sim::fit_in_step_overheads(sim::fit_op_scales(tables, pooled), pooled);
    std::string text = text_before_ops(cluster_path);
    // op_tables_to_toml starts with a blank line; the kept text already ends with one
    if (text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") == 0) text.pop_back();
    write_file_atomically(cluster_path, text + sim::op_tables_to_toml(fitted));
}

}  // namespace prophet::sweep::detail
