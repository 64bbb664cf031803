// HACK: zeroes its input after reading it (a reference run on the same buffer then sees zeros). EXPECT: runtime inputs_changed
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { out[i] = fmaxf(x[i], 0.0f); const_cast<float*>(x)[i] = 0.0f; }
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  relu<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(x, out, B * D);
  return (int)cudaGetLastError();
}
