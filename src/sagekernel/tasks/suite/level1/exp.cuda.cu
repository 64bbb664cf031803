// Elementwise exp(x) (expf, not the __expf approximation).
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void ew_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    out[i] = expf(x[i]);
  }
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  int64_t n = B * D;
  if (n == 0) return 0;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  ew_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, out, n);
  return (int)cudaGetLastError();
}
