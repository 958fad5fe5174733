//===- Conv2dCudnn.cpp - conv2d's library choice, cuDNN -------------------===//
#include "Conv2dImpl.h"
#include "Cudnn.h"

using namespace mtsched;
using namespace mtsched::codegen;
using namespace mtsched::opunits::conv2d;

namespace {

/// The cuDNN descriptors of one conv2d call. They live as long as the call
/// (the benchmarker's and the executor's copies share them) and go with it.
struct CudnnState {
  const cudnn::Api *A = nullptr;
  cudnn::TensorDesc X = nullptr, Y = nullptr, B = nullptr;
  cudnn::FilterDesc W = nullptr;
  cudnn::ConvDesc Conv = nullptr;
  int Algo = 0;
  size_t WorkBytes = 0;
  ~CudnnState() {
    for (cudnn::TensorDesc D : {X, Y, B})
      if (D)
        A->DestroyTensorDescriptor(D);
    if (W)
      A->DestroyFilterDescriptor(W);
    if (Conv)
      A->DestroyConvolutionDescriptor(Conv);
  }
};

/// cuDNN's convolution of N: its descriptors made now, its handle (per
/// stream) and algorithm (cuDNN's heuristic, the first that runs within a
/// GiB of workspace) when planned on a stream. Bias by cudnnAddTensor
/// after the convolution: one more rounding to the result's type than the
/// implicit GEMM, within the tolerances (docs/CUDA.md).
} // namespace

llvm::Expected<OpUnitExternCall>
opunits::conv2d::cudnnCall(const Node &N, llvm::StringRef Choice) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
  };
  if (Choice != CudnnChoice)
    return Err("conv2d has no library choice '" + Choice + "'");
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  const ConvShape S = *SOr;
  for (int64_t V : {S.N, S.C, S.H, S.W, S.O, S.HO, S.WO, S.PH, S.PW, S.SH, S.SW,
                    S.DH, S.DW})
    if (V > std::numeric_limits<int>::max())
      return Err("a size of '%" + N.getName() + "' does not fit cuDNN's int");
  llvm::Expected<const cudnn::Api &> AOr = cudnn::load();
  if (!AOr)
    return AOr.takeError();
  const cudnn::Api &A = *AOr;
  DType Dt = N.getType().Dtype;
  int Type = Dt == DType::BF16  ? cudnn::DataBfloat16
             : Dt == DType::F16 ? cudnn::DataHalf
                                : cudnn::DataFloat;
  auto St = std::make_shared<CudnnState>();
  St->A = &A;
  auto Check = [&](cudnn::Status Status, const char *What) -> llvm::Error {
    if (Status == cudnn::StatusSuccess)
      return llvm::Error::success();
    return Err(llvm::Twine(What) + " failed: " + cudnn::statusText(A, Status));
  };
  if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->X),
                            "cudnnCreateTensorDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->Y),
                            "cudnnCreateTensorDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateFilterDescriptor(&St->W),
                            "cudnnCreateFilterDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateConvolutionDescriptor(&St->Conv),
                            "cudnnCreateConvolutionDescriptor"))
    return std::move(E);
  if (llvm::Error E =
          Check(A.SetTensor4dDescriptor(St->X, cudnn::TensorNchw, Type,
                                        int(S.N), int(S.C), int(S.H), int(S.W)),
                "cudnnSetTensor4dDescriptor (input)"))
    return std::move(E);
  if (llvm::Error E = Check(A.SetTensor4dDescriptor(St->Y, cudnn::TensorNchw,
                                                    Type, int(S.N), int(S.O),
                                                    int(S.HO), int(S.WO)),
                            "cudnnSetTensor4dDescriptor (result)"))
    return std::move(E);
  if (llvm::Error E = Check(
          A.SetFilter4dDescriptor(St->W, Type, cudnn::TensorNchw, int(S.O),
                                  int(S.cg()), int(S.KH), int(S.KW)),
          "cudnnSetFilter4dDescriptor"))
    return std::move(E);
  // torch's conv2d is a cross-correlation; the products summed in fp32.
  if (llvm::Error E = Check(A.SetConvolution2dDescriptor(
                                St->Conv, int(S.PH), int(S.PW), int(S.SH),
                                int(S.SW), int(S.DH), int(S.DW),
                                cudnn::CrossCorrelation, cudnn::DataFloat),
                            "cudnnSetConvolution2dDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.SetConvolutionGroupCount(St->Conv, int(S.Groups)),
                            "cudnnSetConvolutionGroupCount"))
    return std::move(E);
  // fp32 on the CUDA cores (no TF32, whose 10-bit mantissa would miss the
  // fp32 tolerance); 16-bit types on the tensor cores.
  if (llvm::Error E =
          Check(A.SetConvolutionMathType(St->Conv, Dt == DType::F32
                                                       ? cudnn::FmaMath
                                                       : cudnn::TensorOpMath),
                "cudnnSetConvolutionMathType"))
    return std::move(E);
  if (S.Bias) {
    if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->B),
                              "cudnnCreateTensorDescriptor"))
      return std::move(E);
    if (llvm::Error E = Check(A.SetTensor4dDescriptor(St->B, cudnn::TensorNchw,
                                                      Type, 1, int(S.O), 1, 1),
                              "cudnnSetTensor4dDescriptor (bias)"))
      return std::move(E);
  }
  OpUnitExternCall Call;
  const cudnn::Api *Ap = &A;
  std::string Name = N.getName();
  Call.Plan = [Ap, St, Name](void *Stream) -> llvm::Expected<size_t> {
    const cudnn::Api &A = *Ap;
    llvm::Expected<cudnn::Handle> H = cudnn::handleFor(A, Stream);
    if (!H)
      return H.takeError();
    cudnn::FwdAlgoPerf Perf[8];
    int Returned = 0;
    if (cudnn::Status Status = A.GetConvolutionForwardAlgorithm_v7(
            *H, St->X, St->W, St->Conv, St->Y, 8, &Returned, Perf))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cudnnGetConvolutionForwardAlgorithm_v7 failed: " +
              cudnn::statusText(A, Status));
    for (int I = 0; I < Returned; ++I) {
      if (Perf[I].St != cudnn::StatusSuccess)
        continue;
      size_t Bytes = 0;
      if (A.GetConvolutionForwardWorkspaceSize(*H, St->X, St->W, St->Conv,
                                               St->Y, Perf[I].Algo, &Bytes) ||
          Bytes > (size_t(1) << 30))
        continue;
      St->Algo = Perf[I].Algo;
      St->WorkBytes = Bytes;
      return Bytes;
    }
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cuDNN has no forward algorithm for '%" +
                                       Name + "' within 1 GiB of workspace");
  };
  Call.Run = [Ap, St, Bias = S.Bias](void *Stream,
                                     llvm::ArrayRef<void *> Operands,
                                     void *Result, void *Work) -> int {
    const cudnn::Api &A = *Ap;
    llvm::Expected<cudnn::Handle> H = cudnn::handleFor(A, Stream);
    if (!H) {
      llvm::consumeError(H.takeError());
      return -1;
    }
    float One = 1, Zero = 0;
    if (cudnn::Status Status = A.ConvolutionForward(
            *H, &One, St->X, Operands[0], St->W, Operands[1], St->Conv,
            St->Algo, Work, St->WorkBytes, &Zero, St->Y, Result))
      return Status;
    if (Bias)
      return A.AddTensor(*H, &One, St->B, Operands[2], &One, St->Y, Result);
    return 0;
  };
  return Call;
}
