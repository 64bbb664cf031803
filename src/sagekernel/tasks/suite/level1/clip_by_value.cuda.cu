// Elementwise clamp; NaN stays NaN like torch.clamp.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void ew_kernel(const float* __restrict__ x, float* __restrict__ out, float clip_min, float clip_max, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    float v = x[i];
    out[i] = v != v ? v : fminf(fmaxf(v, clip_min), clip_max);
  }
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, float clip_min, float clip_max, cudaStream_t stream) {
  int64_t n = B * D;
  if (n == 0) return 0;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  ew_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, out, clip_min, clip_max, n);
  return (int)cudaGetLastError();
}
