// cuBLAS opened on first use (lib/cuda/cublas_api.h), without a GPU: nothing maps libcublas until cublas_api() is
// called, then every entry point is found; a library that cannot be opened, or that lacks the entry points, is a
// resource error (exit 4) naming it and the fix. The prophet binary starting without loading cuBLAS is
// Cli.StartsWithoutLoadingCublas (tests/cli).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/cublas_api.h"

namespace {

bool cublas_mapped() {
    std::ifstream maps("/proc/self/maps");
    const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    return text.find("/libcublas.so") != std::string::npos;
}

}  // namespace

// First in the file: run as one process (not one per case, as ctest runs it), no case before it has called cuBLAS.
TEST(CublasApi, NothingMapsCublasUntilTheFirstCall) {
    EXPECT_FALSE(cublas_mapped()) << "libcublas was loaded at start (linked as a needed library?)";
    const prophet::cuda::CublasApi& api = prophet::cuda::cublas_api();
    EXPECT_TRUE(cublas_mapped());
    EXPECT_EQ(&api, &prophet::cuda::cublas_api()) << "opened once";
}

TEST(CublasApi, EveryEntryPointIsFound) {
    const prophet::cuda::CublasApi& api = prophet::cuda::cublas_api();
    EXPECT_NE(api.Create, nullptr);
    EXPECT_NE(api.Destroy, nullptr);
    EXPECT_NE(api.SetStream, nullptr);
    EXPECT_NE(api.SetMathMode, nullptr);
    EXPECT_NE(api.Sgemm, nullptr);
    EXPECT_NE(api.SgemmBatched, nullptr);
    EXPECT_NE(api.GemmEx, nullptr);
    EXPECT_NE(api.GemmBatchedEx, nullptr);
    EXPECT_NE(api.GemmGroupedBatchedEx, nullptr);
}

struct BadLibrary {
    const char* name;
    const char* library;  // what load_cublas is given
    const char* says;     // in the error besides the library's name
};

class CublasLoad : public ::testing::TestWithParam<BadLibrary> {};

TEST_P(CublasLoad, FailsWithAResourceErrorNamingTheLibraryAndTheFix) {
    const BadLibrary& row = GetParam();
    try {
        prophet::cuda::load_cublas(row.library);
        FAIL() << row.library << " loaded";
    } catch (const prophet::Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.exit_code(), prophet::kExitResource) << what;
        EXPECT_NE(what.find(row.library), std::string::npos) << what;
        EXPECT_NE(what.find(row.says), std::string::npos) << what;
        EXPECT_NE(what.find("LD_LIBRARY_PATH"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, CublasLoad,
    ::testing::Values(BadLibrary{"absent", "libcublas-absent.so.0", "cannot open"},
                      // a real library without cuBLAS's entry points: the first one looked up is named
                      BadLibrary{"not_cublas", "libz.so.1", "has no cublasCreate_v2"}),
    [](const ::testing::TestParamInfo<BadLibrary>& info) { return std::string(info.param.name); });

// with the rank set (after MPI_Init), the error names it as every error of the backend does (cuda/check.h)
TEST(CublasApi, LoadErrorNamesTheRank) {
    prophet::cuda::set_error_rank(3);
    std::string message = "loaded";
    try {
        prophet::cuda::load_cublas("libcublas-absent.so.0");
    } catch (const prophet::Error& e) {
        message = e.what();
    }
    prophet::cuda::set_error_rank(-1);  // before any assertion: the other cases of this binary expect no rank
    EXPECT_NE(message.find("cuBLAS error (rank 3): cannot open"), std::string::npos) << message;
}
