//===- CudaCollectiveCheck.cpp - Collective inputs and their check --------===//
//
// Every rank's seeded input (each rank can compute every peer's), the
// buffers of one collective at one size, and the check of a choice's output
// against the host's sum, with the epilogue applied as the interpreter
// applies it.
//
//===----------------------------------------------------------------------===//
#include "CudaCollectiveImpl.h"
#include "CudaDevice.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Reference/SampledError.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

using namespace mtsched;
using namespace mtsched::cuda;
using namespace mtsched::nccl;

/// Where the seeded streams of a collective's inputs start: rank R's input
/// is stream CollectiveStream + R; the epilogue's bias, residual and
/// weights are CollectiveStream + 901, 902 and 903.
static constexpr uint64_t CollectiveStream = uint64_t(1) << 20;

float DrawnStream::at(int64_t I) const {
  return T == DType::I32 || T == DType::I64
             ? float(int64_t(randomBits(Key, I) % 2000) - 1000)
             : float(randomValueAt(Key, I, T));
}

/// Stream Stream's first N values, as DrawnStream reads them.
static std::vector<float> hostValues(uint64_t Seed, uint64_t Stream, int64_t N,
                                     DType T) {
  std::vector<float> V(size_t(std::max<int64_t>(0, N)));
  DrawnStream S{randomKey(Seed, Stream), T};
  parallelChunks(
      N,
      [&](int64_t Begin, int64_t End) {
        for (int64_t I = Begin; I < End; ++I)
          V[size_t(I)] = S.at(I);
      },
      /*MinChunk=*/1 << 18);
  return V;
}

double valueAt(const std::string &Bytes, int64_t I, DType T) {
  if (T == DType::I64) {
    int64_t V;
    std::memcpy(&V, &Bytes[size_t(I) * 8], 8);
    return double(V);
  }
  if (T == DType::I32) {
    int32_t V;
    std::memcpy(&V, &Bytes[size_t(I) * 4], 4);
    return double(V);
  }
  if (T == DType::F32) {
    float F;
    std::memcpy(&F, &Bytes[size_t(I) * 4], 4);
    return F;
  }
  uint16_t H;
  std::memcpy(&H, &Bytes[size_t(I) * 2], 2);
  return T == DType::BF16 ? bf16ToFloat(H) : f16ToFloat(H);
}

std::vector<int64_t> mtsched::cuda::raggedCounts(int64_t Rows, int64_t Capacity,
                                                 int Ranks) {
  int64_t Per = std::min(Rows, Capacity) / Ranks;
  std::vector<int64_t> C(size_t(Ranks) * size_t(Ranks));
  for (int R = 0; R < Ranks; ++R)
    for (int P = 0; P < Ranks; ++P)
      C[size_t(R) * size_t(Ranks) + size_t(P)] =
          Per * (1 + 2 * ((R + P) % Ranks)) / Ranks;
  return C;
}

bool CollectiveRankImpl::prepare(const MultiTemplateBufferNode &N,
                                 const Workload &W, std::string &Err) {
  const TensorType &XT = N.getOperand(0)->getType();
  DType T = XT.Dtype;
  int64_t InElems = W.Bytes / dtypeBytes(T);
  int Ranks = Comm.size();
  int64_t OutElems = InElems;
  // An uneven all_to_all is timed at its own shapes (size hints scale even
  // messages only), its rows split by raggedCounts.
  int64_t RowElems =
      XT.Shape.empty() || XT.Shape[0] == 0 ? 1 : XT.numElements() / XT.Shape[0];
  if (W.Ragged) {
    InElems = XT.numElements();
    OutElems = N.getType().numElements();
  }
  if (W.Collective == CollectiveKind::AllToAll && !W.Ragged &&
      XT.numElements() != XT.Shape[0] * RowElems) {
    Err = "internal: all_to_all rows do not tile its operand";
    return false;
  }
  // The GPU moves contiguous chunks: an even split of dimension 0 (or of a
  // later one under leading dimensions of size 1).
  if (W.Collective == CollectiveKind::AllToAll && !W.Ragged)
    if (const Attribute *A = N.getAttrs().get("dim"))
      for (int64_t D = 0; A->isInt() && D < A->getInt(); ++D)
        if (XT.Shape[size_t(D)] != 1) {
          Err = "all_to_all over dimension " + std::to_string(A->getInt()) +
                " is timed on GPUs only under leading dimensions of size 1";
          return false;
        }
  if (W.Collective == CollectiveKind::AllGather)
    OutElems = InElems * Ranks;
  if (W.Collective == CollectiveKind::ReduceScatter)
    OutElems = InElems / Ranks;
  int64_t Cols = N.getOperand(0)->getType().Shape.empty()
                     ? InElems
                     : N.getOperand(0)->getType().Shape.back();
  if (Cols <= 0 || InElems % Cols)
    Cols = InElems;
  // A fused epilogue that also writes its sum needs a second output, peer-
  // visible like the first (two_shot writes every rank's); nodes of one
  // name and shape differ in that.
  bool WantSum = W.Collective == CollectiveKind::AllReduce &&
                 !N.getEpilogueWrites().empty();
  std::string Key = std::to_string(InElems) + "/" + std::to_string(Cols) + "/" +
                    std::string(dtypeName(T)) + "/" +
                    std::string(collectiveKindName(W.Collective)) + "/" +
                    N.getName() + (WantSum ? "/sum" : "") +
                    (W.Ragged ? "/ragged" + std::to_string(OutElems) : "");
  if (Key == B.Key)
    return true;
  // Peers may still be inside a kernel reading our buffers, or hold them
  // open: close ours, then meet, then free.
  if (!B.Key.empty()) {
    syncStream(*D, Stream, "the collective stream");
    closeImported(B.Imported);
    Comm.barrier(Opts.ChoiceTimeout);
    freeBuffers();
  }
  llvm::TimeTraceScope Scope("cuda.collective.prepare", "%" + N.getName());
  B.Key = Key;
  B.Ragged = W.Ragged;
  B.RowElems = RowElems;
  if (W.Ragged)
    B.Counts = raggedCounts(InElems / RowElems, OutElems / RowElems, Ranks);
  B.T = T;
  B.InElems = InElems;
  B.OutElems = OutElems;
  B.Cols = Cols;
  size_t InB = size_t(InElems) * dtypeBytes(T),
         OutB = size_t(OutElems) * dtypeBytes(T);
  double L2 = 3.0 * 64 * 1024 * 1024; // 3x the L2 (H200: 60 MiB)
  B.Copies =
      int(std::min(8.0, std::max(1.0, std::ceil(L2 / double(InB + OutB)))));
  // Every rank's input, as the check reads it; this rank's own is filled on
  // its GPU where the support kernels load (the same hash, so the same
  // values), else copied from the host.
  bool Ok = true;
  BenchSupport *Fill = BenchSupport::canFill(T) ? support() : nullptr;
  B.HostIn.clear();
  for (int R = 0; R < Ranks; ++R)
    B.HostIn.push_back(
        {randomKey(Opts.Seed, CollectiveStream + uint64_t(R)), T});
  // Writes stream Stream's first Count values to P, or Stored's (values
  // that are not a stream's as drawn: the RMSNorm weights).
  auto Upload = [&](CUdeviceptr P, int64_t Count, uint64_t Stream,
                    const std::vector<float> *Stored = nullptr) {
    if (Fill && !Stored)
      return !llvm::errorToBool(
          Fill->fill(P, Count, T, Opts.Seed, Stream, this->Stream));
    std::vector<float> Host =
        Stored ? *Stored : hostValues(Opts.Seed, Stream, Count, T);
    std::string Dev =
        toDeviceBytes(std::vector<double>(Host.begin(), Host.end()), T);
    return !D->cuMemcpyHtoDAsync(P, Dev.data(), Dev.size(), this->Stream);
  };
  // Every copy's input, output and sum in one allocation, laid out alike on
  // every rank: an MPI peer opens one IPC handle per node, not one per
  // buffer (24 with 8 copies and sums).
  auto Aligned = [](size_t Bytes) { return (Bytes + 255) / 256 * 256; };
  size_t InA = Aligned(InB), OutA = Aligned(OutB),
         SumA = WantSum ? Aligned(InB) : 0, Stride = InA + OutA + SumA;
  if (CUresult R =
          D->cuMemAlloc(&B.Arena, std::max<size_t>(16, Stride * B.Copies))) {
    B.Arena = 0;
    Ok = false;
    Err = "cannot allocate " + std::to_string(Stride * B.Copies) +
          " bytes on device " + std::to_string(Dev.Ordinal) + ": " +
          D->errorString(R);
  }
  for (int C = 0; C < B.Copies && Ok; ++C) {
    CUdeviceptr Base = B.Arena + CUdeviceptr(Stride) * CUdeviceptr(C);
    B.In.push_back(Base);
    B.Out.push_back(Base + InA);
    if (WantSum)
      B.Sum.push_back(Base + InA + OutA);
    if (!Upload(Base, InElems, CollectiveStream + uint64_t(Comm.rank()))) {
      Ok = false;
      Err = "cannot fill the input on device " + std::to_string(Dev.Ordinal);
    }
  }
  if (Ok && W.Ragged)
    Ok = uploadRaggedCounts();
  // Epilogue operands, the same on every rank (replicated tensors): a bias
  // and RMSNorm weights a row long, a residual of the input's size.
  if (Ok && W.Collective == CollectiveKind::AllReduce)
    Ok = uploadEpilogueOperands(Cols, Upload);
  if (!agree(Ok)) {
    if (Err.empty())
      Err = "a peer rank could not allocate its buffers";
    freeBuffers();
    return false;
  }
  if (!PeerError.empty())
    return true; // only nccl runs; it needs no peer pointers
  std::vector<std::vector<CUdeviceptr>> All;
  if (!exchangePointers({B.Arena}, All, B.Imported, Err)) {
    freeBuffers();
    return false;
  }
  setPeerPointers(All, Stride, InA, OutA, WantSum);
  return true;
}

bool CollectiveRankImpl::uploadRaggedCounts() {
  // This rank's send counts (a row of Counts), then its receive counts (a
  // column).
  int Ranks = Comm.size();
  std::vector<int64_t> Mine(size_t(2 * Ranks));
  for (int P = 0; P < Ranks; ++P) {
    Mine[size_t(P)] = B.Counts[size_t(Comm.rank() * Ranks + P)];
    Mine[size_t(Ranks + P)] = B.Counts[size_t(P * Ranks + Comm.rank())];
  }
  return !(
      D->cuMemAlloc(&B.CountsDev, Mine.size() * 8) ||
      D->cuMemcpyHtoDAsync(B.CountsDev, Mine.data(), Mine.size() * 8, Stream));
}

bool CollectiveRankImpl::uploadEpilogueOperands(int64_t Cols,
                                                const UploadFn &Upload) {
  DType T = B.T;
  int64_t InElems = B.InElems;
  B.HostBias = hostValues(Opts.Seed, CollectiveStream + 901, Cols, T);
  B.HostRes = {randomKey(Opts.Seed, CollectiveStream + 902), T};
  // Weights near 1: 1 + x/4, rounded, so drawn on the host only.
  B.HostGamma = hostValues(Opts.Seed, CollectiveStream + 903, Cols, T);
  for (float &G : B.HostGamma)
    G = float(roundTo(1.0 + 0.25 * double(G), T));
  bool Ok = true;
  for (CUdeviceptr *P : {&B.Bias, &B.Res, &B.Gamma}) {
    size_t Bytes = (P == &B.Res ? InElems : Cols) * dtypeBytes(T);
    if (Ok && D->cuMemAlloc(P, std::max<size_t>(16, Bytes))) {
      *P = 0;
      Ok = false;
    }
  }
  return Ok && Upload(B.Bias, Cols, CollectiveStream + 901, nullptr) &&
         Upload(B.Res, InElems, CollectiveStream + 902, nullptr) &&
         Upload(B.Gamma, Cols, 0, &B.HostGamma);
}

void CollectiveRankImpl::setPeerPointers(
    const std::vector<std::vector<CUdeviceptr>> &All, size_t Stride, size_t InA,
    size_t OutA, bool WantSum) {
  B.PeerIn.assign(size_t(B.Copies), MtPtrs{});
  B.PeerOut.assign(size_t(B.Copies), MtPtrs{});
  B.PeerSum.assign(size_t(B.Copies), MtPtrs{});
  for (int R = 0; R < Comm.size(); ++R)
    for (size_t C = 0; C < size_t(B.Copies); ++C) {
      CUdeviceptr Base = All[size_t(R)][0] + CUdeviceptr(Stride * C);
      B.PeerIn[C].P[R] = Base;
      B.PeerOut[C].P[R] = Base + InA;
      if (WantSum)
        B.PeerSum[C].P[R] = Base + InA + OutA;
    }
}

bool CollectiveRankImpl::checkSum(const std::string &Bytes,
                                  const CollectiveEpilogue &E,
                                  std::string &Msg) {
  int64_t N = B.InElems;
  ErrorSums Sums = sampledErrors(N, std::max<int64_t>(1, N / (1 << 21)),
                                 [&](int64_t I, ErrorSums &S) {
                                   double Ref = 0;
                                   for (size_t R = 0; R < B.HostIn.size(); ++R)
                                     Ref += B.HostIn[R].at(I);
                                   if (E.Bias)
                                     Ref += B.HostBias[size_t(I % B.Cols)];
                                   if (E.Residual)
                                     Ref += B.HostRes.at(I);
                                   S.add(valueAt(Bytes, I, B.T), Ref);
                                 });
  double Rel = Sums.rel();
  if (Sums.Finite && Rel <= tolerance(B.T))
    return true;
  Msg = "second output (the sum) on rank " + std::to_string(Comm.rank()) +
        " differs from the fp64 reference: relative error " +
        llvm::formatv("{0:e2}", Rel).str() + " > " +
        llvm::formatv("{0:e0}", tolerance(B.T)).str();
  return false;
}

bool CollectiveRankImpl::check(const std::string &Bytes, const Workload &W,
                               bool Fused, const CollectiveEpilogue &E,
                               std::string &Msg) {
  int Ranks = Comm.size(), Rank = Comm.rank();
  int64_t N = B.OutElems;
  ErrorSums Sums;
  auto Cmp = [&](int64_t I, double Ref) {
    Sums.add(valueAt(Bytes, I, B.T), Ref);
  };
  auto Sum = [&](int64_t I) {
    double S = 0;
    for (int R = 0; R < Ranks; ++R)
      S += B.HostIn[size_t(R)].at(I);
    return S;
  };
  int64_t Step = std::max<int64_t>(1, N / (1 << 21));
  if (W.Collective == CollectiveKind::AllToAll && B.Ragged) {
    // Rows from rank 0, then rank 1, ..., each starting where that rank's
    // rows for this rank start in its input; zeros after the last.
    int64_t Row = 0;
    for (int R = 0; R < Ranks; ++R) {
      int64_t From = 0;
      for (int P = 0; P < Rank; ++P)
        From += B.Counts[size_t(R * Ranks + P)];
      int64_t Cnt = B.Counts[size_t(R * Ranks + Rank)];
      for (int64_t I = 0; I < Cnt * B.RowElems; ++I)
        Cmp((Row * B.RowElems) + I,
            B.HostIn[size_t(R)].at(From * B.RowElems + I));
      Row += Cnt;
    }
    for (int64_t I = Row * B.RowElems; I < N; ++I)
      Cmp(I, 0);
  } else if (W.Collective == CollectiveKind::AllToAll) {
    // Chunk r of the output is chunk `Rank` of rank r's input.
    int64_t M = N / Ranks;
    Sums = sampledErrors(N, 1, [&](int64_t I, ErrorSums &S) {
      S.add(valueAt(Bytes, I, B.T),
            B.HostIn[size_t(I / M)].at(Rank * M + I % M));
    });
  } else if (W.Collective == CollectiveKind::AllGather) {
    Sums = sampledErrors(N, Step, [&](int64_t I, ErrorSums &S) {
      S.add(valueAt(Bytes, I, B.T),
            B.HostIn[size_t(I / B.InElems)].at(I % B.InElems));
    });
  } else if (W.Collective == CollectiveKind::ReduceScatter) {
    Sums = sampledErrors(N, Step, [&](int64_t I, ErrorSums &S) {
      S.add(valueAt(Bytes, I, B.T), Sum(Rank * N + I));
    });
  } else if (!Fused || !E.RmsNorm) {
    Sums = sampledErrors(N, Step, [&](int64_t I, ErrorSums &S) {
      double X = Sum(I);
      if (Fused) {
        if (E.Bias)
          X += B.HostBias[size_t(I % B.Cols)];
        if (E.Residual)
          X += B.HostRes.at(I);
        if (E.Activation)
          X = evaluatePointwise(*E.Activation, {X});
      }
      S.add(valueAt(Bytes, I, B.T), X);
    });
  } else {
    int64_t Rows = N / B.Cols;
    int64_t RowStep = std::max<int64_t>(1, Rows / 64);
    std::vector<double> X(size_t(B.Cols));
    for (int64_t Row = 0; Row < Rows;
         Row = Row + RowStep < Rows || Row == Rows - 1 ? Row + RowStep
                                                       : Rows - 1) {
      double SS = 0;
      for (int64_t C = 0; C < B.Cols; ++C) {
        int64_t I = Row * B.Cols + C;
        double V = Sum(I);
        if (E.Bias)
          V += B.HostBias[size_t(C)];
        if (E.Residual)
          V += B.HostRes.at(I);
        X[size_t(C)] = V;
        SS += V * V;
      }
      double Inv = 1 / std::sqrt(SS / double(B.Cols) + E.Eps);
      for (int64_t C = 0; C < B.Cols; ++C)
        Cmp(Row * B.Cols + C, X[size_t(C)] * Inv * B.HostGamma[size_t(C)]);
    }
  }
  double Rel = Sums.rel();
  if (Sums.Finite && Rel <= tolerance(B.T))
    return true;
  Msg = "output on rank " + std::to_string(Rank) +
        " differs from the fp64 reference: relative error " +
        llvm::formatv("{0:e2}", Rel).str() + " > " +
        llvm::formatv("{0:e0}", tolerance(B.T)).str();
  return false;
}
