// import_build.cpp: a LoadSeries (one engine file's counts) into a prophet trace, by the rules of
// docs/trace-format.md section 7:
//   1. layers with no token in any step (dense layers an engine numbers among the MoE ones) are left out;
//   2. steps with no token at all (unfilled slots of a recorder's ring buffer) are left out;
//   3. tokens: every kept (step, layer) must sum to the same T = tokens x top_k ("exact"), or, with
//      rescale_tokens = N, each (step, layer) is scaled to N x top_k by largest remainders ("rescaled-N": every
//      expert's share kept within one token; ties to the lower index);
//   4. devices: a recorded split is kept; otherwise expert e's c tokens are spread uniformly over the D devices:
//      c / D each and the c mod D remaining tokens dealt one each to the next devices of a cursor that runs on
//      across the layer's experts, so every device routes the same number of tokens to within one.
// The trace's source records the format and rules 3 and 4:
//   "import:<format> split=<recorded|uniform> tokens=<exact|rescaled-N> file=<first file>[ (+<n> files)]".
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "import.h"
#include "load_series.h"

namespace prophet::import_detail {
namespace {

int64_t layer_total(const LoadSeries& s, int step, int layer) {
    int64_t total = 0;
    for (int d = 0; d < s.sources; ++d)
        for (int e = 0; e < s.experts; ++e) total += s.at(step, layer, d, e);
    return total;
}

// Largest-remainder scaling of counts[0..n) (sum > 0) to sum `target`, in place.
void rescale(int64_t* counts, size_t n, int64_t target) {
    const __int128 total = std::accumulate(counts, counts + n, __int128{0});
    std::vector<__int128> remainder(n);
    int64_t given = 0;
    for (size_t i = 0; i < n; ++i) {
        const __int128 scaled = static_cast<__int128>(counts[i]) * target;
        remainder[i] = scaled % total;
        counts[i] = static_cast<int64_t>(scaled / total);
        given += counts[i];
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
    for (int64_t k = 0; k < target - given; ++k) ++counts[order[static_cast<size_t>(k)]];
}

// Rule 4 for one layer: loads[E] over `devices` rows of out[D][E].
void spread_uniform(const int64_t* loads, int experts, int devices, int64_t* out) {
    int cursor = 0;
    for (int e = 0; e < experts; ++e) {
        const int64_t base = loads[e] / devices;
        const int extra = static_cast<int>(loads[e] % devices);
        for (int d = 0; d < devices; ++d) out[static_cast<size_t>(d) * experts + e] = base;
        for (int j = 0; j < extra; ++j) ++out[static_cast<size_t>((cursor + j) % devices) * experts + e];
        cursor = (cursor + extra) % devices;
    }
}

std::string join_names(const LoadSeries& s, const std::vector<int>& layers) {
    std::string text;
    for (size_t i = 0; i < layers.size() && i < 8; ++i) text += (i ? ", " : "") + s.layer_names[layers[i]];
    return layers.size() > 8 ? text + " and " + std::to_string(layers.size() - 8) + " more" : text;
}

// Rules 1 and 2: the kept layers and steps; throws when a kept step has no token at some kept layer.
void kept_steps_and_layers(const LoadSeries& s, std::vector<int>& steps, std::vector<int>& layers,
                           std::vector<std::string>& notes) {
    std::vector<int> dense;
    for (int l = 0; l < s.layers; ++l) {
        bool any = false;
        for (int i = 0; i < s.steps && !any; ++i) any = layer_total(s, i, l) > 0;
        (any ? layers : dense).push_back(l);
    }
    if (layers.empty()) throw_input_error(s.origin, "every count is zero", "pass a file that recorded some tokens");
    if (!dense.empty())
        notes.push_back("no token in any step at " + join_names(s, dense) + " (dense layers): left out");
    for (int i = 0; i < s.steps; ++i) {
        int with_tokens = 0;
        for (int l : layers) with_tokens += layer_total(s, i, l) > 0;
        if (with_tokens == 0) continue;
        if (with_tokens != static_cast<int>(layers.size()))
            for (int l : layers)
                if (layer_total(s, i, l) == 0)
                    throw_input_error(s.origin,
                                      "step " + std::to_string(i) + " has no token at " + s.layer_names[l] +
                                          " but tokens at other layers",
                                      "every token passes every MoE layer: pass complete steps");
        steps.push_back(i);
    }
    if (static_cast<int>(steps.size()) < s.steps)
        notes.push_back(std::to_string(s.steps - static_cast<int>(steps.size())) + " of " + std::to_string(s.steps) +
                        " steps carry no token (unfilled recorder slots): left out");
}

// Rule 3 check in exact mode: the common total of every kept (step, layer).
int64_t common_total(const LoadSeries& s, const std::vector<int>& steps, const std::vector<int>& layers) {
    const int64_t first = layer_total(s, steps[0], layers[0]);
    for (int i : steps)
        for (int l : layers)
            if (const int64_t total = layer_total(s, i, l); total != first)
                throw_input_error(s.origin,
                                  "step " + std::to_string(i) + ", " + s.layer_names[l] + " routes " +
                                      std::to_string(total) + " token-expert assignments but step " +
                                      std::to_string(steps[0]) + ", " + s.layer_names[layers[0]] + " routes " +
                                      std::to_string(first) + ": a trace needs the same number in every step",
                                  "pass --rescale-tokens N to scale every step to N tokens (each expert's share kept "
                                  "to within one token)");
    return first;
}

// The value the file records (from_file > 0) or else the option's; both given must agree, neither is a usage error.
int file_or_option(const char* option, int from_file, int given, const std::string& what, const std::string& needed,
                   const std::string& format) {
    if (from_file > 0 && given > 0 && from_file != given)
        throw_config_error(option, std::to_string(given), "the file records " + std::to_string(from_file) + " " + what,
                           std::string("leave ") + option + " out or give the file's value");
    const int value = from_file > 0 ? from_file : given;
    if (value <= 0) throw Error(kExitUsage, "usage error: --format " + format + " needs " + option + ": " + needed);
    return value;
}

int resolve_top_k(const LoadSeries& s, const ImportOptions& o) {
    const int top_k = file_or_option("--top-k", s.top_k, o.top_k, "experts per token",
                                     "the file does not record how many experts a token selects", o.format);
    if (top_k > s.experts)
        throw_config_error("--top-k", std::to_string(top_k),
                           "must be at most the file's " + std::to_string(s.experts) + " experts",
                           "give the model's top-k");
    return top_k;
}

int resolve_devices(const LoadSeries& s, const ImportOptions& o) {
    const int devices = file_or_option("--devices", s.sources > 1 ? s.sources : 0, o.devices, "devices (ranks)",
                                       "the file has no per-device counts, so they are spread over D devices "
                                       "(docs/trace-format.md, section 7)",
                                       o.format);
    if (devices > 65536) throw_config_error("--devices", std::to_string(devices), "must be in [1, 65536]", "give D");
    return devices;
}

std::string source_text(const LoadSeries& s, const ImportOptions& o) {
    std::string text = "import:" + o.format + " split=" + (s.sources > 1 ? "recorded" : "uniform") +
                       " tokens=" + (o.rescale_tokens > 0 ? "rescaled-" + std::to_string(o.rescale_tokens) : "exact") +
                       " file=" + (o.files.empty() ? s.origin : o.files[0]);
    if (o.files.size() > 1) text += " (+" + std::to_string(o.files.size() - 1) + " files)";
    return text;
}

// Copies one kept (step, layer) into `out` [D][E]: rescaled when asked, spread when the split is not recorded.
void fill_layer(const LoadSeries& s, int step, int layer, int devices, int64_t target, int64_t* out) {
    const int64_t* first = s.cells(step, layer);
    std::vector<int64_t> cells(first, first + static_cast<size_t>(s.sources) * s.experts);
    if (target > 0) rescale(cells.data(), cells.size(), target);
    if (s.sources > 1)
        std::copy(cells.begin(), cells.end(), out);
    else
        spread_uniform(cells.data(), s.experts, devices, out);
}

}  // namespace

Trace build_imported_trace(const LoadSeries& s, const ImportOptions& o, std::vector<std::string>& notes) {
    const int top_k = resolve_top_k(s, o);
    const int devices = resolve_devices(s, o);
    std::vector<int> steps, layers;
    kept_steps_and_layers(s, steps, layers, notes);
    const int64_t total = o.rescale_tokens > 0 ? o.rescale_tokens * top_k : common_total(s, steps, layers);
    if (total % top_k != 0)
        throw_input_error(s.origin,
                          "each layer routes " + std::to_string(total) +
                              " token-expert assignments, not a multiple of top_k = " + std::to_string(top_k),
                          "give the model's --top-k (every token selects top_k experts)");
    check_cells(s.origin, static_cast<int64_t>(steps.size()), static_cast<int64_t>(layers.size()), devices, s.experts);
    Trace trace;
    trace.meta.num_iterations = static_cast<int>(steps.size());
    trace.meta.num_layers = static_cast<int>(layers.size());
    trace.meta.num_devices = devices;
    trace.meta.num_experts = s.experts;
    trace.meta.top_k = top_k;
    trace.meta.tokens_per_iteration = total / top_k;
    trace.meta.source = source_text(s, o);
    trace.counts.assign(steps.size() * layers.size() * static_cast<size_t>(devices) * s.experts, 0);
    for (size_t i = 0; i < steps.size(); ++i)
        for (size_t l = 0; l < layers.size(); ++l)
            fill_layer(s, steps[i], layers[l], devices, o.rescale_tokens > 0 ? total : 0,
                       trace.layer_counts(static_cast<int>(i), static_cast<int>(l)));
    if (s.sources == 1)
        notes.push_back("the file has no per-device counts: each expert's tokens spread uniformly over " +
                        std::to_string(devices) + " devices");
    validate_trace(trace, s.origin);
    return trace;
}

}  // namespace prophet::import_detail
