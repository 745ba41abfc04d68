// calibrate_pooled.cpp: validate_cluster = "calibrate" fits the per-op model's scale and in_step_us on several
// recordings of the calibration config, pooled, and rewrites the [ops] section of the calibrated cluster file.
//
// Why: one process's steps of the same config run up to ~7% faster or slower than another's on the suite's 2-core
// VMs (10 recordings of main-2rank with the gate's routing: median step 14.9-17.0 ms), and the calibration's scale
// (recorded / modelled own time per kind) inherits its one process's draw: four calibrations of the main job gave
// expert-forward scales 1.12-1.35 and replay errors of 2.2-14.4% on the same 20 runs. The median over the steps
// of several processes samples that spread instead of one draw.
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

// the file's text up to the last line before its [ops] header that is neither blank nor a comment: what
// op_tables_to_toml writes (a blank line, its comment, the section) starts right after it
std::string text_before_ops(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(kExitResource, "cannot read the calibrated cluster file " + path);
    std::ostringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    size_t end = s.find("\n[ops]");
    if (end == std::string::npos) throw Error(kExitResource, path + ": no [ops] section to re-fit");
    while (end > 0) {                                 // s[end] is the newline ending the line before
        const size_t start = s.rfind('\n', end - 1);  // npos: that line is the file's first
        const size_t first = start == std::string::npos ? 0 : start + 1;
        if (first < end && s[first] != '#') break;
        if (start == std::string::npos) return "";
        end = start;
    }
    return s.substr(0, end + 1);
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
    const sim::OpTables fitted = sim::fit_to_recordings(tables, pooled);
    write_file_atomically(cluster_path, text_before_ops(cluster_path) + sim::op_tables_to_toml(fitted));
}

}  // namespace prophet::sweep::detail
