// uncertainty.cpp: truth_scale / uncertainty in a sweep file -> grid axes over truth.*_scale (uncertainty.h).
#include "sweep/uncertainty.h"

#include "core/config.h"
#include "core/error.h"
#include "core/toml_text.h"

namespace prophet::sweep::detail {

namespace {

constexpr const char* kScaleNames[] = {"compute", "bandwidth", "latency", "intra_bandwidth", "inter_bandwidth"};
constexpr const char* kExample = "truth_scale = { compute = [0.7, 1.0, 1.3], bandwidth = [0.7, 1.0, 1.3] }";

bool known_scale(const std::string& name) {
    for (const char* k : kScaleNames)
        if (name == k) return true;
    return false;
}

// a truth scale value as the grid stores it (value_to_toml of a float)
std::string scale_text(double v) { return value_to_toml(Value(v)); }

}  // namespace

std::vector<GridAxis> truth_axes(const toml::table& sweep, const std::string& engine) {
    const toml::node* table_node = sweep.get("truth_scale");
    const toml::node* shorthand = sweep.get("uncertainty");
    if (!table_node && !shorthand) return {};
    const std::string key = table_node ? "sweep.truth_scale" : "sweep.uncertainty";
    const std::string text = toml_node_text(table_node ? *table_node : *shorthand);
    if (table_node && shorthand)
        throw_config_error("sweep.uncertainty", toml_node_text(*shorthand), "cannot be set beside truth_scale",
                           "keep one: uncertainty = 0.3 is truth_scale with compute, bandwidth and latency at "
                           "[0.7, 1.0, 1.3]");
    if (engine != "sim")
        throw_config_error(key, text,
                           "perturbs the simulated truth, which only engine = \"sim\" has (engine is \"" + engine +
                               "\")",
                           "use engine = \"sim\", or plan.compute_scale / plan.bandwidth_scale for the planner's "
                           "belief");
    std::vector<GridAxis> axes;
    if (shorthand) {
        const std::optional<double> u = shorthand->value<double>();
        if (!u || !(*u > 0 && *u < 1))
            throw_config_error(key, text, "must be a number in (0, 1): the relative error of the cluster's figures",
                               "uncertainty = 0.3");
        for (const char* name : {"compute", "bandwidth", "latency"})
            axes.push_back({std::string("truth.") + name + "_scale",
                            {scale_text(1 - *u), scale_text(1.0), scale_text(1 + *u)}});
        return axes;
    }
    const toml::table* table = table_node->as_table();
    if (!table || table->empty())
        throw_config_error(key, text, "must be a non-empty table of scale name -> list of factors", kExample);
    for (const auto& [name_key, node] : *table) {
        const std::string name(name_key.str());
        if (!known_scale(name))
            throw_config_error(key + "." + name, toml_node_text(node), "unknown scale",
                               "use compute, bandwidth, latency, intra_bandwidth or inter_bandwidth");
        const toml::array* values = node.as_array();
        if (!values || values->empty())
            throw_config_error(key + "." + name, toml_node_text(node), "must be a non-empty list of factors",
                               name + " = [0.7, 1.0, 1.3]");
        GridAxis axis;
        axis.key = "truth." + name + "_scale";
        for (const toml::node& item : *values) {
            const std::optional<double> v = item.value<double>();
            if (!v || !(*v > 0))
                throw_config_error(key + "." + name, toml_node_text(item), "every factor must be a number > 0",
                                   name + " = [0.7, 1.0, 1.3]");
            axis.values.push_back(scale_text(*v));
        }
        axes.push_back(std::move(axis));
    }
    return axes;
}

}  // namespace prophet::sweep::detail
