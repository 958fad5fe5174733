// CUDA built-ins for running a generated attention kernel on the host (run.sh).
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;
std::barrier<> *g_bar;
std::vector<std::barrier<> *> g_wbar;
float g_wbuf[32][32];
float g_smem[1 << 16];
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(x)
#include <atomic>
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline void __syncthreads() { g_bar->arrive_and_wait(); }
struct float4 {
  float x, y, z, w;
};
// Loads that bypass L1 (the split-KV combine reads other blocks' partials).
inline float __ldcg(const float *p) { return *p; }
inline float4 __ldcg(const float4 *p) { return *p; }
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline float __shfl_xor_sync(unsigned, float v, int o) {
  int w = threadIdx.x / 32, l = threadIdx.x % 32;
  g_wbuf[w][l] = v;
  g_wbar[w]->arrive_and_wait();
  float r = g_wbuf[w][l ^ o];
  g_wbar[w]->arrive_and_wait();
  return r;
}
inline float mt_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(~0u, v, o);
  return v;
}
inline float mt_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(~0u, v, o));
  return v;
}

inline float mt_block_sum(float v, float *red) {
  v = mt_warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w)
    t += red[w];
  return t;
}
inline float mt_block_max(float v, float *red) {
  v = mt_warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (unsigned w = 0; w < blockDim.x / 32; ++w)
    t = fmaxf(t, red[w]);
  return t;
}
