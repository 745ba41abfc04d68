// The expert-parallel executor over MPI ranks: the exact-movement and oracle checks of moe_checks.h for every
// placement case. ctest runs them as `mpirun --allow-run-as-root --oversubscribe -np 4 test_moe
// --gtest_filter=Mpi*` (test moe_mpi_4); without a launcher they skip.
//   mpirun -np 4 ./build/tests/test_moe --gtest_filter='Mpi*'
#include <gtest/gtest.h>

#include "comm/comm.h"
#include "kernels/blas.h"
#include "moe_checks.h"

using namespace prophet;
using namespace prophet::moe_test;

namespace {

// MPI is initialised once for the whole binary (gtest_main owns main), only when a launcher started it.
class MpiEnvironment : public ::testing::Environment {
  public:
    static Communicator* world() { return world_.get(); }
    void SetUp() override {
        if (mpi_available() && launched_by_mpi()) {
            blas_set_num_threads(1);
            world_ = make_mpi_communicator(nullptr, nullptr);
            world_->set_timeout_s(120.0);  // a rank that failed and left a collective fails the others, not hangs
        }
    }
    void TearDown() override {
        world_.reset();
        finalize_mpi();
    }

  private:
    static inline std::unique_ptr<Communicator> world_;
};
::testing::Environment* const g_mpi_environment = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

#define SKIP_UNLESS_MPI()                                                       \
    Communicator* world = MpiEnvironment::world();                              \
    if (!world) GTEST_SKIP() << "not started by mpirun (or built without MPI)"; \
    Communicator& comm = *world

struct MpiCase {
    PlacementCase placement;
    RouteRule rule;
};

void PrintTo(const MpiCase& c, std::ostream* os) { *os << case_name(c.placement) << " " << route_rule_name(c.rule); }

std::string mpi_case_name(const ::testing::TestParamInfo<MpiCase>& info) {
    return std::string(case_name(info.param.placement)) + "_" + route_rule_name(info.param.rule);
}

const MpiCase kCases[] = {
    {PlacementCase::kStatic, RouteRule::kOwner},
    {PlacementCase::kReplicated, RouteRule::kOwner},
    {PlacementCase::kMovedOwners, RouteRule::kOwner},
    {PlacementCase::kMovedOwnersReplicated, RouteRule::kOwner},
    {PlacementCase::kReplicated, RouteRule::kLeastLoaded},
    {PlacementCase::kMovedOwnersReplicated, RouteRule::kLeastLoaded},
    {PlacementCase::kReplicated, RouteRule::kEvenSplit},
    {PlacementCase::kMovedOwnersReplicated, RouteRule::kEvenSplit},
    {PlacementCase::kReplicated, RouteRule::kFlow},
    {PlacementCase::kMovedOwnersReplicated, RouteRule::kFlow},
    {PlacementCase::kMovedOwnersReplicated, RouteRule::kMaxFlow},
};

class MpiMoeEp : public ::testing::TestWithParam<MpiCase> {};

}  // namespace

TEST_P(MpiMoeEp, ExactMovement) {
    SKIP_UNLESS_MPI();
    for (uint64_t seed : {1u, 2u, 3u}) check_exact_movement(comm, GetParam().placement, GetParam().rule, seed);
}

TEST_P(MpiMoeEp, MatchesLocalExecutor) {
    SKIP_UNLESS_MPI();
    for (uint64_t seed : {11u, 12u}) check_oracle(comm, GetParam().placement, GetParam().rule, seed);
}

// The host staging of the GPU path (model/expert_compute.h) between MPI processes: the experts on an arena of their
// own, moved to and from the executor's storage only by the staging calls (blocking schedule).
TEST_P(MpiMoeEp, HostStagedComputeMatchesLocalExecutor) {
    SKIP_UNLESS_MPI();
    for (uint64_t seed : {11u, 12u})
        check_oracle(comm, GetParam().placement, GetParam().rule, seed, /*resident=*/false, /*placement_changes=*/true,
                     /*staged=*/true);
}

// FasterMoE's schedule between MPI processes: Trans/Agg on the communication thread (isend/irecv from a second
// thread, MPI_THREAD_MULTIPLE) while the main thread runs the all-to-alls (MPI_Ialltoallv) beside them.
TEST_P(MpiMoeEp, FasterMoEScheduleMatchesLocalExecutor) {
    SKIP_UNLESS_MPI();
    if (mpi_thread_level() != "MPI_THREAD_MULTIPLE") GTEST_SKIP() << "MPI provides " << mpi_thread_level();
    for (uint64_t seed : {11u, 12u})
        check_oracle(comm, GetParam().placement, GetParam().rule, seed, /*resident=*/false, /*placement_changes=*/true,
                     /*staged=*/false, EpScheduleMode::kFasterMoE);
}

INSTANTIATE_TEST_SUITE_P(Mpi, MpiMoeEp, ::testing::ValuesIn(kCases), mpi_case_name);
