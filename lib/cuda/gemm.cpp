// gemm.cpp: row-major GEMMs on cuBLAS (column-major underneath).
//
// A row-major matrix X [r,c] with row stride ld is, read column-major, X^T [c,r] with leading dimension ld. So
// row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and the M/N sizes, keep
// each operand's own transpose flag. No copies, and strided views (one head of qkv) work as on the CPU.
//
// Precision (context.h): fp32 and tf32 call cublasSgemm*/the handle's math mode; bf16 calls the Ex variants with
// CUBLAS_COMPUTE_32F_FAST_16BF (fp32 operands in memory, bf16 tensor-core products, fp32 accumulation).
#include <vector>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/cublas_api.h"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {
cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }
bool bf16(const Context& ctx) { return ctx.precision() == GemmPrecision::kBf16; }
cublasComputeType_t compute_type(const Context& ctx) {
    return bf16(ctx) ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
}
}  // namespace

void gemm(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
    PROPHET_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) return;
    if (bf16(ctx)) {
        PROPHET_CUBLAS_CHECK(cublas_api().GemmEx(ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, B, CUDA_R_32F,
                                                 ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc, compute_type(ctx),
                                                 CUBLAS_GEMM_DEFAULT));
        return;
    }
    PROPHET_CUBLAS_CHECK(
        cublas_api().Sgemm(ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

void gemm_batched(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* const* A,
                  int lda, const float* const* B, int ldb, float beta, float* const* C, int ldc, int count) {
    PROPHET_ASSERT(M >= 0 && N >= 0 && K >= 0 && count >= 0);
    if (M == 0 || N == 0 || count == 0) return;
    if (bf16(ctx)) {
        PROPHET_CUBLAS_CHECK(cublas_api().GemmBatchedEx(
            ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, reinterpret_cast<const void* const*>(B),
            CUDA_R_32F, ldb, reinterpret_cast<const void* const*>(A), CUDA_R_32F, lda, &beta,
            reinterpret_cast<void* const*>(C), CUDA_R_32F, ldc, count, compute_type(ctx), CUBLAS_GEMM_DEFAULT));
        return;
    }
    PROPHET_CUBLAS_CHECK(cublas_api().SgemmBatched(ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, B, ldb, A,
                                                   lda, &beta, C, ldc, count));
}

void gemm_grouped(Context& ctx, bool trans_a, bool trans_b, float alpha, float beta,
                  const std::vector<GemmProblem>& problems) {
    // NOTE: problems with M or N of 0 are no-ops; K == 0 (C = beta C) is left to gemm(), so the grouped call only
    // sees sizes every cuBLAS version accepts
    std::vector<GemmProblem> group;  // [G]
    group.reserve(problems.size());
    for (const GemmProblem& p : problems) {
        PROPHET_ASSERT(p.M >= 0 && p.N >= 0 && p.K >= 0);
        if (p.M == 0 || p.N == 0) continue;
        if (p.K == 0) {
            gemm(ctx, trans_a, trans_b, p.M, p.N, p.K, alpha, p.A, p.lda, p.B, p.ldb, beta, p.C, p.ldc);
            continue;
        }
        group.push_back(p);
    }
    const int G = (int)group.size();
    if (G == 0) return;
    if (ctx.grouped_gemm_native()) {
        // one group per problem (group_size 1): the sizes differ per expert. Scalars and sizes are host arrays;
        // the operand pointers must be device arrays: [3][G] in the workspace, copied on the stream (ordered
        // after any earlier reader of the workspace; pageable source, so the copy is staged before this returns)
        std::vector<cublasOperation_t> ta(G, op(trans_b)), tb(G, op(trans_a));  // operands swapped (row-major)
        std::vector<int> m(G), n(G), k(G), lda(G), ldb(G), ldc(G), size(G, 1);
        std::vector<float> alphas(G, alpha), betas(G, beta);
        std::vector<const void*> ptrs(3 * (size_t)G);
        for (int g = 0; g < G; g++) {
            const GemmProblem& p = group[g];
            m[g] = p.N, n[g] = p.M, k[g] = p.K, lda[g] = p.ldb, ldb[g] = p.lda, ldc[g] = p.ldc;
            ptrs[g] = p.B, ptrs[G + g] = p.A, ptrs[2 * (size_t)G + g] = p.C;
        }
        void** dev = static_cast<void**>(ctx.workspace(sizeof(void*) * ptrs.size()));
        PROPHET_CUDA_CHECK(cudaMemcpyAsync(dev, ptrs.data(), sizeof(void*) * ptrs.size(), cudaMemcpyHostToDevice,
                                           ctx.stream()));
        const cublasStatus_t status = cublas_api().GemmGroupedBatchedEx(
            ctx.cublas(), ta.data(), tb.data(), m.data(), n.data(), k.data(), alphas.data(),
            const_cast<const void* const*>(dev), CUDA_R_32F, lda.data(), const_cast<const void* const*>(dev + G),
            CUDA_R_32F, ldb.data(), betas.data(), dev + 2 * (size_t)G, CUDA_R_32F, ldc.data(), G, size.data(),
            compute_type(ctx));
        if (status == CUBLAS_STATUS_SUCCESS) return;
        // this cuBLAS has no grouped kernel for the compute type: fall back for the rest of the run (once)
        if (status != CUBLAS_STATUS_NOT_SUPPORTED)
            throw_cublas_error(status, "cublasGemmGroupedBatchedEx", __FILE__, __LINE__);
        ctx.set_grouped_gemm_native(false);
    }
    for (const GemmProblem& p : group)
        gemm(ctx, trans_a, trans_b, p.M, p.N, p.K, alpha, p.A, p.lda, p.B, p.ldb, beta, p.C, p.ldc);
}

}  // namespace prophet::cuda
