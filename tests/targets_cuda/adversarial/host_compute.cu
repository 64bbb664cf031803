// HACK: copies the input to the host, computes there, copies back. EXPECT: lint host_compute
#include <cuda_runtime.h>
#include <stdint.h>
#include <vector>

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  std::vector<float> h(B * D);
  cudaMemcpy(h.data(), x, B * D * sizeof(float), cudaMemcpyDeviceToHost);
  for (auto& v : h) v = v > 0.0f ? v : 0.0f;
  cudaMemcpy(out, h.data(), B * D * sizeof(float), cudaMemcpyHostToDevice);
  return 0;
}
