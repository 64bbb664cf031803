// A deliberately slow softmax: one thread does the whole tensor.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

__global__ void slow_softmax(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D) {
  for (int64_t r = 0; r < B; ++r) {
    float m = -INFINITY, s = 0.0f;
    for (int64_t c = 0; c < D; ++c) m = fmaxf(m, x[r * D + c]);
    for (int64_t c = 0; c < D; ++c) s += expf(x[r * D + c] - m);
    for (int64_t c = 0; c < D; ++c) out[r * D + c] = expf(x[r * D + c] - m) / s;
  }
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D,
                           cudaStream_t stream) {
  slow_softmax<<<1, 1, 0, stream>>>(x, out, B, D);
  return (int)cudaGetLastError();
}
