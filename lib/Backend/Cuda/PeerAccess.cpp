//===- PeerAccess.cpp - Which GPUs reach each other's memory --------------===//
#include "mtsched/Backend/Cuda/PeerAccess.h"
#include "mtsched/Backend/Cuda/CudaApi.h"

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Expected<int> cuda::countDevices() {
  llvm::Expected<const DriverApi &> D = loadDriver();
  if (!D)
    return D.takeError();
  if (CUresult R = D->cuInit(0))
    return err("the CUDA driver did not initialise: " + D->errorString(R));
  int Count = 0;
  if (CUresult R = D->cuDeviceGetCount(&Count))
    return err("cannot count CUDA devices: " + D->errorString(R));
  if (Count == 0)
    return err("the CUDA driver sees no device");
  return Count;
}

llvm::Expected<std::vector<int>> cuda::peerOrdinals(int Ordinal) {
  llvm::Expected<int> Count = countDevices();
  if (!Count)
    return Count.takeError();
  if (Ordinal < 0 || Ordinal >= *Count)
    return err("CUDA device " + llvm::Twine(Ordinal) + " does not exist (" +
               llvm::Twine(*Count) + " devices)");
  const DriverApi &D = *loadDriver();
  CUdevice Self = 0;
  if (CUresult R = D.cuDeviceGet(&Self, Ordinal))
    return err("cannot open CUDA device " + llvm::Twine(Ordinal) + ": " +
               D.errorString(R));
  std::vector<int> Out;
  for (int O = 0; O < *Count; ++O) {
    if (O == Ordinal) {
      Out.push_back(O);
      continue;
    }
    CUdevice Peer = 0;
    int Can = 0;
    // A device the driver cannot query is not a peer: peer memory there
    // would fail at run time, which is what this avoids.
    if (!D.cuDeviceGet(&Peer, O) &&
        !D.cuDeviceCanAccessPeer(&Can, Self, Peer) && Can)
      Out.push_back(O);
  }
  return Out;
}
