// split.cpp: the Trans/Agg split rules (see split.h).
#include "schedule/split.h"

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {

namespace {
constexpr EnumName<TransferSplitRule> kTransferSplitRuleNames[] = {{TransferSplitRule::kTime, "time"},
                                                                   {TransferSplitRule::kHalf, "half"}};
}  // namespace

TransferSplitRule parse_transfer_split_rule(const std::string& name) {
    if (const std::optional<TransferSplitRule> rule = find_enum(kTransferSplitRuleNames, name)) return *rule;
    throw_config_error("schedule.split", name, "unknown split rule", "use time (the paper's) or half (the authors' code)");
}

std::vector<uint8_t> split_transfers(const std::vector<uint8_t>& moving, const std::vector<double>& expert_s,
                                     double nec_budget_s, TransferSplitRule rule) {
    PROPHET_ASSERT(moving.size() == expert_s.size());
    const size_t E = moving.size();
    std::vector<uint8_t> nec(E, 0);
    if (rule == TransferSplitRule::kHalf) {
        size_t n = 0;
        for (size_t e = 0; e < E; e++) n += moving[e] ? 1 : 0;
        size_t take = (n + 1) / 2;
        for (size_t e = 0; e < E && take > 0; e++)
            if (moving[e]) {
                nec[e] = 1;
                take--;
            }
        return nec;
    }
    double left = nec_budget_s;
    for (size_t e = 0; e < E; e++)
        if (moving[e] && expert_s[e] <= left) {
            nec[e] = 1;
            left -= expert_s[e];
        }
    return nec;
}

}  // namespace prophet
