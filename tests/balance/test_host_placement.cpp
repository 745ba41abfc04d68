// keep_replicas_within_groups (comm.replicas_within_host): replicas on another host than their owner are
// dropped, those on the owner's host and every owner are kept.
#include <gtest/gtest.h>

#include "balance/placement.h"

namespace prophet {
namespace {

TEST(HostPlacement, DropsOnlyReplicasOnOtherHosts) {
    Placement p = Placement::make_static(4, 4);  // expert e owned by device e
    for (int d = 0; d < 4; ++d) {
        p.add_replica(0, d);  // expert 0 (owner 0, host 0) on every device
        p.add_replica(3, d);  // expert 3 (owner 3, host 1) on every device
    }
    const std::vector<int> host = {0, 0, 1, 1};
    keep_replicas_within_groups(p, host);
    EXPECT_EQ(check_placement(p, 0), "");
    EXPECT_TRUE(p.holds(0, 1));
    EXPECT_FALSE(p.holds(0, 2));
    EXPECT_FALSE(p.holds(0, 3));
    EXPECT_TRUE(p.holds(3, 2));
    EXPECT_FALSE(p.holds(3, 0));
    EXPECT_FALSE(p.holds(3, 1));
    EXPECT_EQ(p.num_replicas(), 2);
    EXPECT_EQ(p.owner, (std::vector<int>{0, 1, 2, 3}));
    // one host: nothing dropped
    Placement q = Placement::make_static(4, 4);
    for (int d = 0; d < 4; ++d) q.add_replica(1, d);
    keep_replicas_within_groups(q, {5, 5, 5, 5});
    EXPECT_EQ(q.num_replicas(), 3);
}

}  // namespace
}  // namespace prophet
