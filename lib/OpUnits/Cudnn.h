//===- Cudnn.h - cuDNN, opened at run time ----------------------*- C++ -*-===//
//
// The few entry points of cuDNN's legacy API that conv2d's library choice
// (`extern.cudnn`, OpUnits/Conv2d.cpp) calls, found in the library at run
// time: no build dependency, and a machine without cuDNN offers the choice
// only to fail it with the reason. The prototypes and enum values are
// cuDNN's (cudnn_ops.h, cudnn_cnn.h of cuDNN 8 and 9; 9 keeps the legacy
// API in libcudnn.so.9), written out here.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_OPUNITS_CUDNN_H
#define MTSCHED_OPUNITS_CUDNN_H
#include "llvm/Support/Error.h"
#include <cstddef>

namespace mtsched {
namespace cudnn {

using Handle = void *;
using TensorDesc = void *;
using FilterDesc = void *;
using ConvDesc = void *;
using Status = int;

enum : int {
  StatusSuccess = 0,
  TensorNchw = 0,
  DataFloat = 0,
  DataHalf = 2,
  DataBfloat16 = 9,
  CrossCorrelation = 1,
  DefaultMath = 0,
  TensorOpMath = 1,
  FmaMath = 3,
};

/// cudnnConvolutionFwdAlgoPerf_t.
struct FwdAlgoPerf {
  int Algo;
  Status St;
  float Time;
  size_t Memory;
  int Determinism;
  int MathType;
  int Reserved[3];
};

/// The entry points, from one loaded library.
struct Api {
  Status (*Create)(Handle *);
  Status (*SetStream)(Handle, void *);
  const char *(*GetErrorString)(Status);
  size_t (*GetVersion)();
  Status (*CreateTensorDescriptor)(TensorDesc *);
  Status (*SetTensor4dDescriptor)(TensorDesc, int Format, int Type, int N,
                                  int C, int H, int W);
  Status (*CreateFilterDescriptor)(FilterDesc *);
  Status (*SetFilter4dDescriptor)(FilterDesc, int Type, int Format, int K,
                                  int C, int H, int W);
  Status (*CreateConvolutionDescriptor)(ConvDesc *);
  Status (*DestroyTensorDescriptor)(TensorDesc);
  Status (*DestroyFilterDescriptor)(FilterDesc);
  Status (*DestroyConvolutionDescriptor)(ConvDesc);
  Status (*SetConvolution2dDescriptor)(ConvDesc, int PadH, int PadW, int U,
                                       int V, int DilH, int DilW, int Mode,
                                       int ComputeType);
  Status (*SetConvolutionGroupCount)(ConvDesc, int Groups);
  Status (*SetConvolutionMathType)(ConvDesc, int MathType);
  Status (*GetConvolutionForwardAlgorithm_v7)(Handle, TensorDesc, FilterDesc,
                                              ConvDesc, TensorDesc,
                                              int Requested, int *Returned,
                                              FwdAlgoPerf *Perf);
  Status (*GetConvolutionForwardWorkspaceSize)(Handle, TensorDesc, FilterDesc,
                                               ConvDesc, TensorDesc, int Algo,
                                               size_t *Bytes);
  Status (*ConvolutionForward)(Handle, const void *Alpha, TensorDesc,
                               const void *X, FilterDesc, const void *W,
                               ConvDesc, int Algo, void *Work, size_t WorkBytes,
                               const void *Beta, TensorDesc, void *Y);
  Status (*AddTensor)(Handle, const void *Alpha, TensorDesc, const void *A,
                      const void *Beta, TensorDesc, void *C);
  /// Where it was loaded from.
  std::string Path;
};

/// cuDNN, loaded once per process: from $MTSCHED_CUDNN_LIB if set, else
/// libcudnn.so.9, else libcudnn.so.8 on the loader's search path; none
/// where MTSCHED_CUDNN_LIB is `off`. An error names each place tried and
/// why it failed.
llvm::Expected<const Api &> load();

/// The handle of cuDNN for the GPU context that owns Stream (a CUstream),
/// created on first use with that context current and kept for the
/// process, like the GPU sessions.
llvm::Expected<Handle> handleFor(const Api &A, void *Stream);

/// S as words: "CUDNN_STATUS_BAD_PARAM (3)".
std::string statusText(const Api &A, Status S);

} // namespace cudnn
} // namespace mtsched

#endif // MTSCHED_OPUNITS_CUDNN_H
