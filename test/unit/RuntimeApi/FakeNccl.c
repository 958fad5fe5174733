/*===- FakeNccl.c - a libnccl stand-in for RuntimeApiCTest ----------------===*\
|*                                                                            *|
|* The NCCL entry points mtsched looks up (NcclApi.cpp), so that the C test   *|
|* can make a communicator id on a machine without NCCL or GPUs              *|
|* (MTSCHED_LIBNCCL=<this library>): ncclGetUniqueId fills the id with a     *|
|* known pattern; everything else fails, as nothing else may be called      *|
|* without a GPU.                                                            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include <stddef.h>

typedef struct {
  char Internal[128];
} ncclUniqueId;

int ncclGetVersion(int *V) {
  *V = 22800;
  return 0;
}
int ncclGetUniqueId(ncclUniqueId *Id) {
  for (int I = 0; I < 128; ++I)
    Id->Internal[I] = (char)(I * 7 + 3);
  return 0;
}
/* Internal error (3) for the rest. */
int ncclCommInitRank(void *C, int N, ncclUniqueId Id, int R) { return 3; }
int ncclCommDestroy(void *C) { return 3; }
int ncclAllReduce(const void *S, void *D, size_t N, int T, int O, void *C,
                  void *St) {
  return 3;
}
int ncclAllGather(const void *S, void *D, size_t N, int T, void *C, void *St) {
  return 3;
}
int ncclReduceScatter(const void *S, void *D, size_t N, int T, int O, void *C,
                      void *St) {
  return 3;
}
int ncclSend(const void *S, size_t N, int T, int P, void *C, void *St) {
  return 3;
}
int ncclRecv(void *D, size_t N, int T, int P, void *C, void *St) { return 3; }
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
const char *ncclGetErrorString(int R) { return "fake NCCL"; }
