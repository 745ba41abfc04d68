// gemm.cpp: row-major GEMMs on cuBLAS (column-major underneath).
//
// A row-major matrix X [r,c] with row stride ld is, read column-major, X^T [c,r] with leading dimension ld. So
// row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and the M/N sizes, keep
// each operand's own transpose flag. No copies, and strided views (one head of qkv) work as on the CPU.
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {
cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }
}  // namespace

void gemm(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
    PROPHET_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) return;
    PROPHET_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, B, ldb, A, lda, &beta,
                                     C, ldc));
}

void gemm_batched(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* const* A,
                  int lda, const float* const* B, int ldb, float beta, float* const* C, int ldc, int count) {
    PROPHET_ASSERT(M >= 0 && N >= 0 && K >= 0 && count >= 0);
    if (M == 0 || N == 0 || count == 0) return;
    PROPHET_CUBLAS_CHECK(cublasSgemmBatched(ctx.cublas(), op(trans_b), op(trans_a), N, M, K, &alpha, B, ldb, A, lda,
                                            &beta, C, ldc, count));
}

}  // namespace prophet::cuda
