// recorded_run.cpp: a recorded run's steps from the store (timelines, step times, loads, placements) and their
// replay with the recorded durations (replay.h).
#include <algorithm>
#include <map>

#include "core/error.h"
#include "sim/replay.h"
#include "store/store.h"

namespace prophet::sim {

std::string RecordedRun::param(const std::string& key, const std::string& fallback) const {
    for (const auto& [k, v] : params)  // stored as TOML values: a string is quoted
        if (k == key) return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
    return fallback;
}

namespace {

// the placement of one layer at one step from its rows (owner = replica 0), or nullopt-like empty when none
Placement placement_from_rows(const std::vector<PlacementRow>& rows, int D, int E) {
    Placement p;
    p.num_devices = D;
    p.num_experts = E;
    p.owner.assign(E, -1);
    p.replica.assign(static_cast<size_t>(E) * D, 0);
    for (const PlacementRow& row : rows) {
        if (row.expert < 0 || row.expert >= E || row.rank < 0 || row.rank >= D) continue;
        if (row.replica == 0) p.owner[row.expert] = row.rank;
        else p.replica[static_cast<size_t>(row.expert) * D + row.rank] = 1;
    }
    return p;
}

}  // namespace

RecordedRun load_recorded_run(Store& store, const std::string& run_id) {
    const RunRow row = store.get_run(run_id);
    RecordedRun run;
    run.run_id = run_id;
    run.experiment = row.info.experiment;
    run.num_ranks = row.info.world_size;
    run.params = store.get_params(run_id);
    run.schedule = run.param("schedule.mode", "none");
    run.blockwise = run.schedule == "blockwise";
    const int D = run.num_ranks;
    const int L = std::stoi(run.param("model.L", "0"));
    const int E = std::stoi(run.param("model.E", "0"));
    std::map<int64_t, double> step_ms;
    for (const MetricRow& m : store.get_metrics(run_id, "step_ms"))
        if (m.layer == -1 && m.rank == -1) step_ms[m.step] = m.value;
    std::map<int64_t, std::vector<std::vector<ReplayOp>>> timelines;  // step -> [rank] ops
    for (const EventRow& ev : store.get_events(run_id)) {
        if (ev.kind != "timeline") continue;
        if (ev.rank < 0 || ev.rank >= D)
            throw_input_error("run " + run_id, "a timeline event of rank " + std::to_string(ev.rank) + " in a run of " +
                                                   std::to_string(D) + " ranks", "re-record the run");
        auto& ranks = timelines[ev.step];
        ranks.resize(D);
        ranks[ev.rank] = parse_timeline_payload(ev.data_json, ev.rank,
                                                "run " + run_id + " step " + std::to_string(ev.step) + " rank " +
                                                    std::to_string(ev.rank));
    }
    if (timelines.empty())
        throw_input_error("run " + run_id, "has no timeline events",
                          "record the run with prophet train --timeline (every op of every rank per step)");
    std::vector<Placement> current(L);  // placements are stored when they change: carry the last one
    for (int l = 0; l < L; ++l) current[l] = Placement::make_static(D, E);
    for (const auto& [step, ranks] : timelines) {
        RecordedStep s;
        s.step = step;
        const auto ms = step_ms.find(step);
        bool complete = ms != step_ms.end();
        for (const auto& ops : ranks) complete = complete && !ops.empty();
        for (int l = 0; l < L; ++l) {
            const std::vector<PlacementRow> rows = store.get_placements(run_id, step, l);
            if (!rows.empty()) current[l] = placement_from_rows(rows, D, E);
            if (const auto load = store.get_expert_load(run_id, step, l);
                load && load->num_devices == D && load->num_experts == E)
                s.counts.insert(s.counts.end(), load->tokens.begin(), load->tokens.end());
        }
        if (!complete) continue;  // a step some rank did not record (an interrupted run's last)
        if (s.counts.size() != static_cast<size_t>(L) * D * E) s.counts.clear();
        s.placements = current;
        s.measured_ms = ms->second;
        for (const auto& ops : ranks) s.ops.insert(s.ops.end(), ops.begin(), ops.end());
        run.steps.push_back(std::move(s));
    }
    return run;
}

std::vector<StepReplay> replay_recorded(const RecordedRun& run) {
    std::vector<StepReplay> out;
    for (const RecordedStep& s : run.steps) {
        const ReplayGraph g = build_replay_graph(s.ops, run.num_ranks, run.blockwise,
                                                 "run " + run.run_id + " step " + std::to_string(s.step));
        const ReplayTimes t = run_replay(g, recorded_durations(g));
        out.push_back({s.step, s.measured_ms, t.step_us * 1e-3});
    }
    return out;
}

}  // namespace prophet::sim
