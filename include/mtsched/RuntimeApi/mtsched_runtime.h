/*===- mtsched_runtime.h - C API of libmtsched_runtime ------------*- C -*-===*\
|*                                                                            *|
|* Runs a decided module (the IR `mtsched-opt --pipeline=default` prints) on  *|
|* the caller's buffers: a plain C interface with opaque handles, so that a   *|
|* program in any language (Python through ctypes, C, C++) can load it with  *|
|* no mtsched or LLVM header. docs/RUNTIME.md describes it.                   *|
|*                                                                            *|
|* Errors: a function that fails returns NULL (or nonzero) and, if `error` is *|
|* not NULL, stores a message there that the library allocated; release it   *|
|* with mtsched_free_error. Nothing here is thread-safe on one handle; two    *|
|* graphs may run at once on different threads.                              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef MTSCHED_RUNTIMEAPI_MTSCHED_RUNTIME_H
#define MTSCHED_RUNTIMEAPI_MTSCHED_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface; bumped when a signature changes. */
#define MTSCHED_RUNTIME_API_VERSION 2

typedef struct mtsched_module mtsched_module;
typedef struct mtsched_graph mtsched_graph;

/* Element types, as the graph's inputs and outputs hold them in memory. */
typedef enum mtsched_dtype {
  MTSCHED_F32 = 0,    /* float */
  MTSCHED_F16 = 1,    /* IEEE half, as uint16_t bits */
  MTSCHED_BF16 = 2,   /* bfloat16, as uint16_t bits */
  MTSCHED_I32 = 3,    /* int32_t */
  MTSCHED_I64 = 4,    /* int64_t */
  MTSCHED_F8E4M3 = 5, /* one byte */
  MTSCHED_F8E5M2 = 6, /* one byte */
  MTSCHED_BOOL = 7    /* one byte, 0 or 1 */
} mtsched_dtype;

/* MTSCHED_RUNTIME_API_VERSION of the loaded library. */
int mtsched_runtime_api_version(void);

/* Parses and verifies the module text ir_text[0, len). NULL on error. */
mtsched_module *mtsched_module_load(const char *ir_text, size_t len,
                                    char **error);
void mtsched_module_destroy(mtsched_module *module);
/* How many graphs the module has, and the name of graph i (owned by the
 * module). */
int mtsched_module_num_graphs(const mtsched_module *module);
const char *mtsched_module_graph_name(const mtsched_module *module, int i);

/* Bytes of a communicator id (NCCL's unique id). */
#define MTSCHED_COMM_ID_BYTES 128

/* Several ranks, one process each (docs/RUNTIME.md "Several ranks"): rank 0
 * makes a communicator id for `device` ("cuda"; NCCL's unique id, NCCL
 * opened at run time) into id[0, MTSCHED_COMM_ID_BYTES), the caller hands
 * it to every rank (torch.distributed, MPI, a file), and each rank calls
 * mtsched_module_set_ranks before preparing a graph whose world_size > 1.
 * len must be at least MTSCHED_COMM_ID_BYTES. 0 on success. */
int mtsched_comm_id(const char *device, void *id, size_t len, char **error);
/* This process is rank `rank` of `world_size` and the ranks' communicator
 * is `id` (id_len bytes, MTSCHED_COMM_ID_BYTES; NULL with world_size 1).
 * Graphs prepared afterwards run their collectives over it (every rank
 * prepares the same graph at the same time: opening the communicator
 * waits for all of them). World size 1 needs no id and runs collectives as
 * copies, as before. 0 on success. */
int mtsched_module_set_ranks(mtsched_module *module, int rank, int world_size,
                             const void *id, size_t id_len, char **error);

/* Prepares graph `graph_name` (NULL: the module's only graph) to run on
 * `device`: "cpu" (the fp64 reference interpreter, host buffers) or "cuda"
 * or "cuda:N" (device N; the decided kernels on device buffers; one device
 * per process; kernel_cache_dir, if not NULL,
 * is where compiled kernels are kept between processes). The module must
 * outlive the graph. NULL on error. */
mtsched_graph *mtsched_graph_prepare(mtsched_module *module,
                                     const char *graph_name, const char *device,
                                     const char *kernel_cache_dir,
                                     char **error);
void mtsched_graph_destroy(mtsched_graph *graph);

/* The graph's inputs and outputs in order: a name (owned by the graph), an
 * element type, a rank and the shape (dims[0..rank)). Out of range: NULL,
 * -1. */
int mtsched_graph_num_inputs(const mtsched_graph *graph);
int mtsched_graph_num_outputs(const mtsched_graph *graph);
const char *mtsched_graph_input_name(const mtsched_graph *graph, int i);
const char *mtsched_graph_output_name(const mtsched_graph *graph, int i);
int mtsched_graph_input_dtype(const mtsched_graph *graph, int i);
int mtsched_graph_output_dtype(const mtsched_graph *graph, int i);
int mtsched_graph_input_rank(const mtsched_graph *graph, int i);
int mtsched_graph_output_rank(const mtsched_graph *graph, int i);
/* Dimension d of input/output i; -1 out of range. */
int64_t mtsched_graph_input_dim(const mtsched_graph *graph, int i, int d);
int64_t mtsched_graph_output_dim(const mtsched_graph *graph, int i, int d);
/* Bytes of the dtype's element; 0 for an unknown one. */
size_t mtsched_dtype_bytes(int dtype);

/* Runs the graph once: inputs[i] holds input i, outputs[i] receives output
 * i, each dense, row-major, in the graph's element type. On "cpu" they are
 * host pointers and stream is ignored; on "cuda" device pointers and
 * stream a CUstream (NULL: the default stream). 0 on success. */
int mtsched_graph_run(mtsched_graph *graph, void *const *inputs,
                      void *const *outputs, void *stream, char **error);

/* A counter of what preparing and running the graph did, by name:
 * "runs", and on "cuda" "kernels" (modules loaded), "kernels_cached" (their
 * cubins read from the kernel cache), "kernels_compiled" (by NVRTC),
 * "captures" (CUDA graphs captured), "graphs_kept" (captured graphs held,
 * one per binding of pointers seen), "staged_inputs", "staged_outputs"
 * (copied through the runtime's buffers on every run), "arena_bytes" (the
 * one allocation intermediates come from), "allocations" (device
 * allocations held besides it: workspaces, inputs' buffers not yet freed). -1
 * for a name the graph does not keep (docs/RUNTIME.md). */
int64_t mtsched_graph_stat(const mtsched_graph *graph, const char *name);

/* Releases a message an mtsched_* function stored; NULL is fine. */
void mtsched_free_error(char *error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MTSCHED_RUNTIMEAPI_MTSCHED_RUNTIME_H */
