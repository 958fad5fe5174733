// The host driver of run.sh: random q, k, v (and a mask); every block; the
// fp64 check.
// KERNEL, B, HQ_, HKV_, SQ_, SKV_, DD, CAUS, SCALE, GX, GY, TH, WS defined by
// -D
int main() {
  long long nq = (long long)B * HQ_ * SQ_ * DD,
            nk = (long long)B * HKV_ * SKV_ * DD;
  std::vector<float> q(nq), k(nk), v(nk), out(nq, NAN), ws(WS + 1, 0.f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> U(-1, 1);
  for (auto &x : q)
    x = U(rng) * 3;
  for (auto &x : k)
    x = U(rng);
  for (auto &x : v)
    x = U(rng);
#ifndef MB
#define MB 0
#define MH 1
#define MSQ 1
#endif
  // An additive mask [MB, MH, MSQ, SKV] (MB = 0: none): uniform values, -inf
  // at two keys in five but never at key 0, which every row sees.
  std::vector<float> mask((size_t)(MB ? MB : 1) * MH * MSQ * SKV_);
  for (size_t e = 0; e < mask.size(); ++e) {
    float u = U(rng);
    mask[e] = (e % SKV_ != 0 && u > 0.2f) ? -INFINITY : u;
  }
  blockDim.x = TH;
  gridDim.x = GX;
  gridDim.y = GY;
#ifndef GZ
#define GZ 1
#endif
  gridDim.z = GZ;
  // Splits of a tile in reverse order, so the combining CTA is not split 0.
  for (int bz = GZ - 1; bz >= 0; --bz)
    for (unsigned by = 0; by < GY; ++by)
      for (unsigned bx = 0; bx < GX; ++bx) {
        std::barrier<> bar(TH);
        g_bar = &bar;
        std::vector<std::barrier<> *> wb;
        for (int w = 0; w < TH / 32; ++w)
          wb.push_back(new std::barrier<>(32));
        g_wbar = wb;
        std::vector<std::thread> ts;
        for (int t = 0; t < TH; ++t)
          ts.emplace_back([&, t] {
            threadIdx.x = t;
            blockIdx.x = bx;
            blockIdx.y = by;
            blockIdx.z = bz;
#if MB
#define MASK_ARG mask.data(),
#else
#define MASK_ARG
#endif
#if WS
            KERNEL(q.data(), k.data(), v.data(), MASK_ARG out.data(),
                   ws.data());
#else
            KERNEL(q.data(), k.data(), v.data(), MASK_ARG out.data());
#endif
          });
        for (auto &t : ts)
          t.join();
        for (auto *p : wb)
          delete p;
      }
  // reference
  double maxerr = 0, e2 = 0, r2 = 0;
  int G = HQ_ / HKV_;
  for (long long R = 0; R < (long long)B * HQ_ * SQ_; ++R) {
    long long i = R % SQ_, h = (R / SQ_) % HQ_, b = R / (SQ_ * HQ_);
    long long kvh = b * HKV_ + h / G;
    long long last = CAUS ? SKV_ - SQ_ + i : SKV_ - 1;
    std::vector<double> p(last + 1);
    double mx = -INFINITY;
    for (long long j = 0; j <= last; ++j) {
      double d = 0;
      for (int x = 0; x < DD; ++x)
        d += (double)q[R * DD + x] * k[(kvh * SKV_ + j) * DD + x];
      p[j] = d * SCALE;
      if (MB)
        p[j] += mask[(((MB == 1 ? 0 : b) * MH + (MH == 1 ? 0 : h)) * MSQ +
                      (MSQ == 1 ? 0 : i)) *
                         SKV_ +
                     j];
      mx = std::max(mx, p[j]);
    }
    double s = 0;
    for (auto &x : p)
      s += x = std::exp(x - mx);
    for (int x = 0; x < DD; ++x) {
      double o = 0;
      for (long long j = 0; j <= last; ++j)
        o += p[j] / s * v[(kvh * SKV_ + j) * DD + x];
      double e = std::abs(o - out[R * DD + x]);
      if (!(e <= maxerr))
        maxerr = e;
      e2 += e * e;
      r2 += o * o;
    }
  }
  // Counters (the workspace's last GX*GY words for split-KV) back at zero.
  if (GZ > 1)
    for (unsigned i = 0; i < GX * GY; ++i)
      if (ws[WS - GX * GY + i] != 0.f) {
        printf("counter %u not reset\n", i);
        return 1;
      }
  printf("max abs err %.3g rel %.3g\n", maxerr, std::sqrt(e2 / r2));
  return !(maxerr < 1e-4);
}
