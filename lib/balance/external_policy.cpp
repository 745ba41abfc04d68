// external_policy.cpp: the v1 protocol of external policies (external_policy.h, docs/policies.md).
#include "balance/external_policy.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/coprocess.h"
#include "core/error.h"

namespace prophet {
namespace {

using nlohmann::json;

const char* kFix = "the reply must follow schema v1 (docs/policies.md, \"External policies\")";

[[noreturn]] void bad_reply(const std::string& what, const std::string& field, const std::string& problem) {
    throw Error(kExitConfig,
                "external policy error: " + what + ": reply field " + field + " " + problem + "; fix: " + kFix);
}

// The reply line as a JSON object of `type` holding exactly the fields `type` and `payload`.
json reply_object(const std::string& line, const std::string& type, const std::string& payload,
                  const std::string& what) {
    json j;
    try {
        j = json::parse(line);
    } catch (const json::exception& e) {
        throw Error(kExitConfig, "external policy error: " + what + ": the reply is not JSON (" + e.what() +
                                     "): " + line.substr(0, 120) + "; fix: " + kFix);
    }
    if (!j.is_object()) bad_reply(what, "(the reply)", "is " + j.dump().substr(0, 60) + ", not a JSON object");
    for (const auto& item : j.items())
        if (item.key() != "type" && item.key() != payload)
            bad_reply(what, item.key(), "is unknown (a v1 \"" + type + "\" reply holds type and " + payload + ")");
    const auto t = j.find("type");
    if (t == j.end() || !t->is_string() || t->get<std::string>() != type)
        bad_reply(
            what, "type",
            t == j.end() ? "is missing (must be \"" + type + "\")" : "is " + t->dump() + ", must be \"" + type + "\"");
    if (!j.contains(payload)) bad_reply(what, payload, "is missing");
    return j;
}

// holders: [E] lists of devices, the owner first -> a placement; every entry validated
Placement holders_to_placement(const json& holders, const std::string& field, int D, int E, int max_replicas,
                               const std::string& what) {
    if (!holders.is_array() || holders.size() != static_cast<size_t>(E))
        bad_reply(what, field,
                  holders.is_array() ? "has " + std::to_string(holders.size()) + " entries, needs " +
                                           std::to_string(E) + " (one list of devices per expert)"
                                     : "is not an array of " + std::to_string(E) + " lists of devices");
    std::vector<int> owners(E);
    std::vector<std::vector<int>> lists(E);
    for (int e = 0; e < E; ++e) {
        const json& list = holders[e];
        const std::string at = field + "[" + std::to_string(e) + "]";
        if (!list.is_array()) bad_reply(what, at, "is " + list.dump().substr(0, 40) + ", not a list of devices");
        if (list.empty()) bad_reply(what, at, "is empty: expert " + std::to_string(e) + " would have no copy");
        for (const json& d : list) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() >= D)
                bad_reply(what, at, "holds " + d.dump() + ", not a device in [0, " + std::to_string(D) + ")");
            const int device = d.get<int>();
            for (int seen : lists[e])
                if (seen == device) bad_reply(what, at, "names device " + std::to_string(device) + " twice");
            lists[e].push_back(device);
        }
        owners[e] = lists[e][0];
    }
    Placement p = Placement::make_owners(D, owners);
    for (int e = 0; e < E; ++e)
        for (size_t k = 1; k < lists[e].size(); ++k) p.add_replica(e, lists[e][k]);
    if (max_replicas > 0) {
        const std::vector<int> per_device = p.replicas_per_device();
        for (int d = 0; d < D; ++d)
            if (per_device[d] > max_replicas)
                bad_reply(what, field,
                          "puts " + std::to_string(per_device[d]) + " replicas on device " + std::to_string(d) +
                              ", over its " + std::to_string(max_replicas) +
                              " slots (balance.max_replicas_per_device)");
    }
    const std::string problem = check_placement(p, max_replicas);
    if (!problem.empty()) bad_reply(what, field, "is not a valid placement: " + problem);
    return p;
}

json holders_json(const Placement& p) {
    json experts = json::array();
    for (int e = 0; e < p.num_experts; ++e) {
        json list = json::array({p.owner[e]});
        for (int d = 0; d < p.num_devices; ++d)
            if (d != p.owner[e] && p.holds(e, d)) list.push_back(d);
        experts.push_back(std::move(list));
    }
    return experts;
}

json link_classes(const ClusterSpec& c) {
    json classes = json::array();
    auto add = [&](const char* name, double bytes_per_s) {
        if (bytes_per_s > 0) classes.push_back({{"class", name}, {"bytes_per_s", bytes_per_s}});
    };
    add("nvlink", c.nvlink_bytes_per_s);
    add("intra_node", c.intra_node_bytes_per_s);
    add("inter_node", c.inter_node_bytes_per_s);
    add("trans", c.trans_bytes_per_s);
    add("agg", c.agg_bytes_per_s);
    return classes;
}

}  // namespace

std::string external_hello(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts) {
    const ClusterSpec& c = cost.cluster;
    const int D = c.num_devices;
    json links = json::array();  // [D][D] bytes/s of the link a -> b (0 on the diagonal)
    for (int a = 0; a < D; ++a) {
        json row = json::array();
        for (int b = 0; b < D; ++b) row.push_back(a == b ? 0.0 : c.link_bytes_per_s(a, b));
        links.push_back(std::move(row));
    }
    const int E = num_experts;
    json hello = {{"type", "hello"},
                  {"schema", kExternalSchemaVersion},
                  {"role", options.external_offline ? "offline" : "online"},
                  {"routing_fractions", false},
                  {"cluster",
                   {{"name", c.name},
                    {"devices", D},
                    {"devices_per_node", c.devices_per_node},
                    {"nodes", std::max(1, D / std::max(1, c.devices_per_node))},
                    {"link_classes", link_classes(c)},
                    {"link_bytes_per_s", links},
                    {"compute_flops", c.compute_flops}}},
                  {"memory",
                   {{"owned_experts_per_device", D > 0 ? E / D : 0},
                    {"max_replicas_per_device", options.max_replicas_per_device}}},
                  {"model",
                   {{"layers", num_layers},
                    {"experts", E},
                    {"d_model", cost.model.d_model},
                    {"d_ffn", cost.model.d_ffn},
                    {"bytes_per_elem", cost.model.bytes_per_elem},
                    {"tokens_per_device", cost.model.tokens_per_device}}}};
    return hello.dump();
}

Placement parse_placement_reply(const std::string& line, int D, int E, int max_replicas, const std::string& what) {
    const json j = reply_object(line, "placement", "experts", what);
    return holders_to_placement(j["experts"], "experts", D, E, max_replicas, what);
}

std::vector<Placement> parse_window_reply(const std::string& line, int L, int D, int E, int max_replicas,
                                          const std::string& what) {
    const json j = reply_object(line, "placements", "layers", what);
    const json& layers = j["layers"];
    if (!layers.is_array() || layers.size() != static_cast<size_t>(L))
        bad_reply(what, "layers", "must be an array of " + std::to_string(L) + " layers' expert lists");
    std::vector<Placement> out;
    for (int l = 0; l < L; ++l)
        out.push_back(holders_to_placement(layers[l], "layers[" + std::to_string(l) + "]", D, E, max_replicas, what));
    return out;
}

ExternalPolicy::ExternalPolicy(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts)
    : command_(options.external_command), timeout_s_(options.external_timeout_s),
      num_devices_(cost.cluster.num_devices), num_experts_(num_experts), num_layers_(num_layers),
      max_replicas_(options.max_replicas_per_device) {
    if (command_.empty())
        throw_config_error(
            "balance.external", "", "is empty, and balance.policy = external needs a command",
            "--set balance.external=\"/usr/bin/python3 experiments/policies/hottest_to_least_loaded.py\"");
    process_ = std::make_unique<CoProcess>(split_command_line(command_, "balance.external"), "balance.external");
    // the hello also waits for the interpreter to start (and e.g. import torch): at least kStartAllowanceS
    const std::string reply = round_trip(external_hello(options, cost, num_layers, num_experts), "the hello",
                                         std::max(timeout_s_, kStartAllowanceS));
    json j;
    try {
        j = json::parse(reply);
    } catch (const json::exception&) {
        bad_reply("the hello", "(the reply)", "is not JSON: " + reply.substr(0, 120));
    }
    if (!j.is_object() || j.value("type", json()) != "ready")
        bad_reply("the hello", "type", "must be \"ready\" (got " + reply.substr(0, 120) + ")");
    if (j.value("schema", json()) != kExternalSchemaVersion)
        bad_reply("the hello", "schema",
                  "must be " + std::to_string(kExternalSchemaVersion) + " (this prophet speaks v" +
                      std::to_string(kExternalSchemaVersion) + ")");
}

ExternalPolicy::~ExternalPolicy() {
    if (process_) process_->write_line(json{{"type", "bye"}}.dump(), 1.0);  // best effort; the pipe closes next
}

std::string ExternalPolicy::round_trip(const std::string& request, const std::string& what, double timeout_s) {
    const std::string who = "balance.external = `" + command_ + "`";
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", timeout_s);
    CoProcess::Status status = process_->write_line(request, timeout_s);
    std::string reply;
    if (status == CoProcess::Status::kOk) status = process_->read_line(&reply, timeout_s);
    if (status == CoProcess::Status::kTimeout)
        throw Error(kExitDistributed, "external policy timeout: " + who + ": no reply to " + what + " within " +
                                          std::string(timeout) +
                                          " s (balance.external_timeout_s; the hello: at least " +
                                          std::to_string(static_cast<int>(kStartAllowanceS)) + " s)" +
                                          "; fix: make the policy answer sooner or raise balance.external_timeout_s");
    if (status == CoProcess::Status::kClosed)
        throw Error(kExitDistributed, "external policy failed: " + who + " " + process_->exit_description() +
                                          " before replying to " + what +
                                          "; fix: run the command by hand and feed it the request (docs/policies.md)");
    return reply;
}

Placement ExternalPolicy::plan_layer(const LayerPlanRequest& r) {
    const int D = r.num_devices, E = r.num_experts;
    PROPHET_ASSERT(D == num_devices_ && E == num_experts_);
    json counts = json::array();
    for (int d = 0; d < D; ++d)
        counts.push_back(
            std::vector<int64_t>(r.counts + static_cast<size_t>(d) * E, r.counts + static_cast<size_t>(d + 1) * E));
    const Placement current = r.current ? *r.current : Placement::make_static(D, E);
    const json request = {{"type", "plan"},
                          {"iteration", r.iteration},
                          {"layer", r.layer},
                          {"counts", counts},
                          {"placement", holders_json(current)}};
    const std::string what =
        "the plan request of iteration " + std::to_string(r.iteration) + ", layer " + std::to_string(r.layer);
    return parse_placement_reply(round_trip(request.dump(), what, timeout_s_), D, E, max_replicas_, what);
}

std::vector<Placement> ExternalPolicy::plan_window(const WindowPlanRequest& r) {
    const int L = r.num_layers, E = r.num_experts;
    PROPHET_ASSERT(L == num_layers_ && E == num_experts_ && r.num_devices == num_devices_);
    json weight = json::array();  // [L][E], EPLB's `weight`
    for (int l = 0; l < L; ++l)
        weight.push_back(std::vector<double>(r.loads->begin() + static_cast<size_t>(l) * E,
                                             r.loads->begin() + static_cast<size_t>(l + 1) * E));
    const json request = {{"type", "plan_window"}, {"iterations", r.window_iterations}, {"weight", weight}};
    const std::string what = "the plan_window request";
    return parse_window_reply(round_trip(request.dump(), what, timeout_s_), L, num_devices_, E, max_replicas_, what);
}

}  // namespace prophet
