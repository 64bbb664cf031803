// HACK: hands the work to cuBLAS instead of writing a kernel. EXPECT: lint library_op, include
#include <cuda_runtime.h>
#include <stdint.h>
#include <cublas_v2.h>

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  cublasHandle_t h;
  cublasCreate(&h);
  float one = 1.0f;
  cublasSaxpy(h, (int)(B * D), &one, x, 1, out, 1);
  return 0;
}
