// store_traces.cpp: traces in the store: saved with their metadata as JSON and their arrays as little-endian int64
// blobs, loaded by trace_id or by the run that saved them (checked against the metadata), and listed.
#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {

using namespace store_detail;

namespace {

nlohmann::json meta_to_json(const TraceMeta& m) {
    return {{"num_iterations", m.num_iterations},
            {"num_layers", m.num_layers},
            {"num_devices", m.num_devices},
            {"num_experts", m.num_experts},
            {"top_k", m.top_k},
            {"tokens_per_iteration", m.tokens_per_iteration},
            {"d_model", m.d_model},
            {"d_ffn", m.d_ffn},
            {"seq_len", m.seq_len},
            {"source", m.source}};
}

// Missing keys keep their defaults; anything but an object with integer/string values throws.
TraceMeta meta_from_json(const nlohmann::json& j) {
    TraceMeta m;
    if (!j.is_object()) throw std::invalid_argument("meta is not a JSON object");
    m.num_iterations = j.value("num_iterations", 0);
    m.num_layers = j.value("num_layers", 0);
    m.num_devices = j.value("num_devices", 0);
    m.num_experts = j.value("num_experts", 0);
    m.top_k = j.value("top_k", 1);
    m.tokens_per_iteration = j.value("tokens_per_iteration", int64_t{0});
    m.d_model = j.value("d_model", 0);
    m.d_ffn = j.value("d_ffn", 0);
    m.seq_len = j.value("seq_len", 0);
    m.source = j.value("source", std::string());
    return m;
}

// Expected element counts of a trace's arrays from its meta: {counts, transitions when recorded}.
std::pair<size_t, size_t> trace_sizes(const TraceMeta& m) {
    auto i = static_cast<size_t>(std::max(m.num_iterations, 0));
    auto l = static_cast<size_t>(std::max(m.num_layers, 0));
    auto d = static_cast<size_t>(std::max(m.num_devices, 0));
    auto e = static_cast<size_t>(std::max(m.num_experts, 0));
    return {i * l * d * e, l > 0 ? i * (l - 1) * e * e : 0};
}

}  // namespace

std::string Store::save_trace(const Trace& trace, const std::string& run_id) {
    auto [num_counts, num_transitions] = trace_sizes(trace.meta);
    if (trace.counts.size() != num_counts) {
        throw Error(kExitConfig, "cannot store trace from " + trace.meta.source + ": counts holds " +
                                     std::to_string(trace.counts.size()) +
                                     " values, meta says I*L*D*E = " + std::to_string(num_counts));
    }
    if (!trace.transitions.empty() && trace.transitions.size() != num_transitions) {
        throw Error(kExitConfig, "cannot store trace from " + trace.meta.source + ": transitions holds " +
                                     std::to_string(trace.transitions.size()) +
                                     " values, meta says I*(L-1)*E*E = " + std::to_string(num_transitions));
    }
    std::string trace_id = random_id();
    std::string meta = meta_to_json(trace.meta).dump();
    std::string counts = encode_i64_le(trace.counts.data(), trace.counts.size());
    std::string transitions = encode_i64_le(trace.transitions.data(), trace.transitions.size());
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT INTO traces(trace_id, run_id, created_ms, meta, counts, transitions) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
               "save_trace");
        s.text(trace_id).text_or_null(run_id).i64(now_ms()).text(meta).blob(counts);
        if (trace.transitions.empty()) {
            s.null();
        } else {
            s.blob(transitions);
        }
        s.run();
    });
    return trace_id;
}

Trace Store::load_trace(const std::string& trace_or_run_id) {
    auto read = [&](Stmt& s) {
        std::string trace_id = s.col_text(0);
        auto corrupt = [&](const std::string& problem) {
            throw Error(kExitDatabase, "database error: " + impl_->path + ": trace " + trace_id + " is corrupt: " +
                                           problem + "; fix: save the trace again or run `prophet db check`");
        };
        Trace trace;
        try {
            trace.meta = meta_from_json(nlohmann::json::parse(s.col_text(1)));
        } catch (const std::exception& e) {
            corrupt(std::string("bad meta JSON (") + e.what() + ")");
        }
        auto [num_counts, num_transitions] = trace_sizes(trace.meta);
        auto [counts, counts_bytes] = s.col_blob(2);
        if (counts_bytes != num_counts * 8) {
            corrupt("counts blob has " + std::to_string(counts_bytes) + " bytes, meta needs " +
                    std::to_string(num_counts * 8));
        }
        trace.counts = decode_i64_le(counts, counts_bytes);
        if (!s.is_null(3)) {
            auto [transitions, transitions_bytes] = s.col_blob(3);
            if (transitions_bytes != num_transitions * 8) {
                corrupt("transitions blob has " + std::to_string(transitions_bytes) + " bytes, meta needs " +
                        std::to_string(num_transitions * 8));
            }
            trace.transitions = decode_i64_le(transitions, transitions_bytes);
        }
        return trace;
    };
    {
        Stmt s(*impl_, "SELECT trace_id, meta, counts, transitions FROM traces WHERE trace_id = ?1", "load_trace");
        s.text(trace_or_run_id);
        if (s.step()) return read(s);
    }
    {
        Stmt s(*impl_,
               "SELECT trace_id, meta, counts, transitions FROM traces WHERE run_id = ?1 "
               "ORDER BY created_ms DESC, rowid DESC LIMIT 1",
               "load_trace");
        s.text(trace_or_run_id);
        if (s.step()) return read(s);
    }
    throw Error(kExitConfig, "no trace '" + trace_or_run_id + "' in " + impl_->path +
                                 " (neither a trace_id nor a run with a saved trace); fix: pass a trace_id or run_id "
                                 "that `prophet runs` lists, or a trace file");
}

std::vector<TraceRow> Store::list_traces(const std::string& run_id) {
    Stmt s(*impl_,
           "SELECT trace_id, run_id, created_ms, meta FROM traces WHERE (?1 = '' OR run_id = ?1) "
           "ORDER BY created_ms DESC, rowid DESC",
           "list_traces");
    s.text(run_id);
    return s.rows<TraceRow>([](Stmt& s) {
        TraceRow r;
        r.trace_id = s.col_text(0);
        r.run_id = s.col_text(1);
        r.created_ms = s.col_i64(2);
        try {
            r.meta = meta_from_json(nlohmann::json::parse(s.col_text(3)));
        } catch (const std::exception&) {
            r.meta = TraceMeta{};
        }
        return r;
    });
}

}  // namespace prophet
