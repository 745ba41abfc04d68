// bench_ilp_gap.cpp: MoETuner's two-stage ILP against the joint ILP on small random instances (the gap), and the
// two-stage solve time against E, D and L; every instance recorded in the store's bench table (docs/serving.md,
// "ILP gap"); report/fig_ilp_gap.py draws it.
//
//   ./build/bench/bench_ilp_gap [--store results/prophet.db] [--seeds 3] [--time-limit 5] [--quick]
//
// Rows: name "two-stage/E<E>/D<D>/L<L>" or "joint/E<E>/D<D>/L<L>", rep = seed, real_ns = wall time of the solve
// (CBC + MoETuner's heuristics), counters = {E, D, L, J, load_term, traffic_term} (+ gap, bound, proven for
// joint). Instances: lib/serve/ilp_gap.h (4096 top-1 tokens, Zipf 1.0, affinity 0.7, one node of equal links).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serve/ilp_gap.h"
#include "store/store.h"

using namespace prophet;

int main(int argc, char** argv) {
    std::string store_path = "results/prophet.db";
    int seeds = 3;
    double time_limit = 5.0;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--store" && i + 1 < argc) store_path = argv[++i];
        else if (a == "--seeds" && i + 1 < argc) seeds = std::atoi(argv[++i]);
        else if (a == "--time-limit" && i + 1 < argc) time_limit = std::atof(argv[++i]);
        else if (a == "--quick") quick = true;
        else {
            std::fprintf(stderr, "usage: bench_ilp_gap [--store FILE] [--seeds N] [--time-limit S] [--quick]\n");
            return kExitUsage;
        }
    }
    if (seeds < 1 || !(time_limit > 0)) {
        std::fprintf(stderr, "bench_ilp_gap: --seeds must be >= 1 and --time-limit > 0 (got %d, %g)\n", seeds,
                     time_limit);
        return kExitUsage;
    }
    BalanceOptions options;
    options.ilp_time_limit_s = time_limit;
    // joint-sized instances (every one within kJoint*: the gap), then larger ones for the two-stage solve time
    struct Shape { int E, D, L; };
    std::vector<Shape> shapes = {{4, 2, 2}, {4, 2, 3}, {8, 2, 2}, {8, 4, 2}, {8, 4, 3}, {8, 4, 4}};
    if (!quick)
        for (const Shape s : {Shape{16, 4, 4}, Shape{32, 4, 4}, Shape{64, 4, 4}, Shape{32, 8, 4}, Shape{32, 16, 4},
                              Shape{32, 4, 8}, Shape{32, 4, 16}})
            shapes.push_back(s);
    try {
        Store store = Store::open(store_path);
        RunInfo info;
        info.experiment = "ilp-gap";
        info.command = "bench_ilp_gap";
        info.config_toml = "seeds = " + std::to_string(seeds) + "\ntime_limit_s = " + std::to_string(time_limit) +
                           "\nquick = " + (quick ? "true" : "false") + "\n";
        info.backend = "bench";
        const std::string run_id = store.begin_run(info);
        std::printf("%-10s %3s %3s %3s %5s | %10s %10s %8s | %9s %9s\n", "kind", "E", "D", "L", "seed", "two-stage J",
                    "joint J", "gap", "2-stage s", "joint s");
        for (const Shape& s : shapes)
            for (int seed = 1; seed <= seeds; ++seed) {
                const serve::IlpInstance in = serve::make_ilp_instance(s.E, s.D, s.L, static_cast<uint64_t>(seed));
                const serve::IlpGapResult r = serve::compare_ilps(in, options);
                const std::string shape =
                    "/E" + std::to_string(s.E) + "/D" + std::to_string(s.D) + "/L" + std::to_string(s.L);
                nlohmann::json two = {{"E", s.E}, {"D", s.D}, {"L", s.L}, {"J", r.two_stage.objective},
                                      {"load_term", r.two_stage.load_term}, {"traffic_term", r.two_stage.traffic_term}};
                store.transaction([&] {
                    store.put_bench(run_id, "two-stage" + shape, seed, r.two_stage_s * 1e9, 0, 1, two.dump());
                    if (r.has_joint) {
                        nlohmann::json joint = {{"E", s.E}, {"D", s.D}, {"L", s.L}, {"J", r.joint.objective},
                                                {"load_term", r.joint.load_term},
                                                {"traffic_term", r.joint.traffic_term}, {"gap", r.gap()},
                                                {"bound", r.joint_bound}, {"proven", r.joint_proven}};
                        store.put_bench(run_id, "joint" + shape, seed, r.joint_s * 1e9, 0, 1, joint.dump());
                    }
                });
                std::printf("%-10s %3d %3d %3d %5d | %10.4f %10s %8s | %9.3f %9s\n", r.has_joint ? "both" : "two-stage",
                            s.E, s.D, s.L, seed, r.two_stage.objective,
                            r.has_joint ? std::to_string(r.joint.objective).c_str() : "-",
                            r.has_joint ? (std::to_string(r.gap() * 100).substr(0, 6) + "%").c_str() : "-",
                            r.two_stage_s, r.has_joint ? std::to_string(r.joint_s).c_str() : "-");
                std::fflush(stdout);
            }
        store.finish_run(run_id, "finished", 0, "");
        std::fprintf(stderr, "bench_ilp_gap: run %s in %s\n", run_id.c_str(), store_path.c_str());
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_ilp_gap: %s\n", e.what());
        return e.exit_code();
    }
    return kExitOk;
}
