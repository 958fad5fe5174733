/*===- RuntimeApiCTest.c - libmtsched_runtime from plain C ----------------===*\
|*                                                                            *|
|* Compiled as C (so the header must be), linked to the shared library only: *|
|* loads a module, queries its graph, runs it on "cpu" and checks the values *|
|* against a reference computed here; then the error paths. Exit 0: passed.  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include "mtsched/RuntimeApi/mtsched_runtime.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int Failures = 0;
#define CHECK(Cond)                                                            \
  do {                                                                         \
    if (!(Cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #Cond); \
      ++Failures;                                                              \
    }                                                                          \
  } while (0)

/* y = relu(x @ w + b), an i64 input passed through a cast, and a bf16
 * output. */
static const char Module[] =
    "graph @g(%x: f32[2,3], %w: f32[3,4], %b: f32[4], %i: i64[3]) {\n"
    "  %m = matmul(%x, %w) : f32[2,4]\n"
    "  %a = add(%m, %b) : f32[2,4]\n"
    "  %y = relu(%a) : f32[2,4]\n"
    "  %h = cast(%y) : bf16[2,4]\n"
    "  %j = add(%i, %i) : i64[3]\n"
    "  return %y, %h, %j\n"
    "}\n";

static float bf16ToFloat(uint16_t H) {
  uint32_t U = (uint32_t)H << 16;
  float F;
  memcpy(&F, &U, sizeof F);
  return F;
}

int main(void) {
  char *Error = NULL;
  CHECK(mtsched_runtime_api_version() == MTSCHED_RUNTIME_API_VERSION);
  mtsched_module *M = mtsched_module_load(Module, strlen(Module), &Error);
  if (!M) {
    fprintf(stderr, "load failed: %s\n", Error ? Error : "(no message)");
    mtsched_free_error(Error);
    return 1;
  }
  CHECK(mtsched_module_num_graphs(M) == 1);
  CHECK(strcmp(mtsched_module_graph_name(M, 0), "g") == 0);
  CHECK(mtsched_module_graph_name(M, 1) == NULL);

  mtsched_graph *G = mtsched_graph_prepare(M, NULL, "cpu", NULL, &Error);
  if (!G) {
    fprintf(stderr, "prepare failed: %s\n", Error ? Error : "(no message)");
    mtsched_free_error(Error);
    return 1;
  }
  CHECK(mtsched_graph_num_inputs(G) == 4);
  CHECK(mtsched_graph_num_outputs(G) == 3);
  CHECK(strcmp(mtsched_graph_input_name(G, 1), "w") == 0);
  CHECK(mtsched_graph_input_dtype(G, 3) == MTSCHED_I64);
  CHECK(mtsched_graph_input_rank(G, 0) == 2);
  CHECK(mtsched_graph_input_dim(G, 1, 0) == 3);
  CHECK(mtsched_graph_input_dim(G, 1, 1) == 4);
  CHECK(mtsched_graph_input_dim(G, 1, 2) == -1);
  CHECK(strcmp(mtsched_graph_output_name(G, 1), "h") == 0);
  CHECK(mtsched_graph_output_dtype(G, 1) == MTSCHED_BF16);
  CHECK(mtsched_graph_output_dim(G, 0, 1) == 4);
  CHECK(mtsched_graph_input_name(G, 4) == NULL);
  CHECK(mtsched_graph_output_dtype(G, -1) == -1);
  CHECK(mtsched_dtype_bytes(MTSCHED_BF16) == 2);
  CHECK(mtsched_dtype_bytes(99) == 0);

  float X[6], W[12], B[4], Y[8], Ref[8];
  int64_t I[3] = {1, -2, (int64_t)1 << 60}, J[3];
  uint16_t H[8];
  for (int K = 0; K < 6; ++K)
    X[K] = (float)(K - 2) * 0.5f;
  for (int K = 0; K < 12; ++K)
    W[K] = (float)((K * 7) % 5 - 2) * 0.25f;
  for (int K = 0; K < 4; ++K)
    B[K] = (float)K * 0.1f - 0.15f;
  for (int R = 0; R < 2; ++R)
    for (int C = 0; C < 4; ++C) {
      double S = B[C];
      for (int D = 0; D < 3; ++D)
        S += (double)X[R * 3 + D] * W[D * 4 + C];
      Ref[R * 4 + C] = S > 0 ? (float)S : 0.0f;
    }
  void *Inputs[4] = {X, W, B, I};
  void *Outputs[3] = {Y, H, J};
  /* Twice: a prepared graph runs as often as asked. */
  for (int Run = 0; Run < 2; ++Run) {
    memset(Y, 0xff, sizeof Y);
    int RC = mtsched_graph_run(G, Inputs, Outputs, NULL, &Error);
    CHECK(RC == 0);
    if (RC) {
      fprintf(stderr, "run failed: %s\n", Error ? Error : "(no message)");
      mtsched_free_error(Error);
      Error = NULL;
    }
    for (int K = 0; K < 8; ++K) {
      CHECK(fabsf(Y[K] - Ref[K]) <= 1e-6f);
      CHECK(fabsf(bf16ToFloat(H[K]) - Ref[K]) <= 1e-2f * fabsf(Ref[K]));
    }
    CHECK(J[0] == 2 && J[1] == -4 && J[2] == ((int64_t)1 << 61));
  }

  /* A null buffer is an error, not a crash. */
  void *NoInput[4] = {X, NULL, B, I};
  CHECK(mtsched_graph_run(G, NoInput, Outputs, NULL, &Error) != 0);
  CHECK(Error && strstr(Error, "input %w is null"));
  mtsched_free_error(Error);
  Error = NULL;

  /* The counters: two runs (the failed one not counted); the interpreter
   * loads, compiles and captures nothing; an unknown name is -1. */
  CHECK(mtsched_graph_stat(G, "runs") == 2);
  CHECK(mtsched_graph_stat(G, "kernels") == 0);
  CHECK(mtsched_graph_stat(G, "kernels_compiled") == 0);
  CHECK(mtsched_graph_stat(G, "captures") == 0);
  CHECK(mtsched_graph_stat(G, "no_such_counter") == -1);
  CHECK(mtsched_graph_stat(G, NULL) == -1);
  CHECK(mtsched_graph_stat(NULL, "runs") == -1);
  mtsched_graph_destroy(G);

  /* Unknown graph and device. */
  CHECK(!mtsched_graph_prepare(M, "nope", "cpu", NULL, &Error));
  CHECK(Error && strstr(Error, "no graph @nope"));
  mtsched_free_error(Error);
  Error = NULL;
  CHECK(!mtsched_graph_prepare(M, "g", "tpu", NULL, &Error));
  CHECK(Error && strstr(Error, "unknown device 'tpu'"));
  mtsched_free_error(Error);
  Error = NULL;
  /* "cuda" prepares where a GPU is, else says why; never crashes. */
  mtsched_graph *GC = mtsched_graph_prepare(M, "g", "cuda", NULL, &Error);
  CHECK(GC || (Error && *Error));
  mtsched_graph_destroy(GC);
  mtsched_free_error(Error);
  Error = NULL;
  mtsched_module_destroy(M);

  /* Several ranks: the ranks and the communicator's id are checked as
   * data; world size 1 needs no id; a graph of two ranks is refused on cpu
   * and where this process's world differs; a group smaller than the world
   * is refused before any communicator opens. */
  {
    static const char Tp[] =
        "group @tp = [0, 1]\n"
        "group @half = [1]\n"
        "graph @ar(%x: f32[2,4]) attributes {world_size = 2} {\n"
        "  %a = all_reduce(%x) {group = \"tp\"} : f32[2,4]\n"
        "  return %a\n"
        "}\n"
        "graph @sub(%x: f32[2,4]) attributes {world_size = 2} {\n"
        "  %a = all_reduce(%x) {group = \"half\"} : f32[2,4]\n"
        "  return %a\n"
        "}\n"
        "graph @one(%x: f32[2,4]) {\n"
        "  %a = all_reduce(%x) : f32[2,4]\n"
        "  return %a\n"
        "}\n";
    mtsched_module *T = mtsched_module_load(Tp, strlen(Tp), &Error);
    CHECK(T != NULL);
    if (!T) {
      fprintf(stderr, "%s\n", Error ? Error : "?");
      return 1;
    }
    char Id[MTSCHED_COMM_ID_BYTES];
    memset(Id, 7, sizeof Id);
    /* Bad ranks, a short or missing id: errors, not crashes. */
    CHECK(mtsched_module_set_ranks(T, 2, 2, Id, sizeof Id, &Error) != 0);
    CHECK(Error && strstr(Error, "rank 2 of world size 2"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_module_set_ranks(T, 0, 0, NULL, 0, &Error) != 0);
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_module_set_ranks(T, 1, 2, Id, 16, &Error) != 0);
    CHECK(Error && strstr(Error, "got 16"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_module_set_ranks(T, 1, 2, NULL, 0, &Error) != 0);
    CHECK(Error && strstr(Error, "got none"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_module_set_ranks(NULL, 0, 1, NULL, 0, NULL) != 0);
    /* The module's default world is one rank: @ar is refused, @one runs
     * (its collective a copy). */
    CHECK(!mtsched_graph_prepare(T, "ar", "cpu", NULL, &Error));
    CHECK(Error && strstr(Error, "rank 0 of 1"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_module_set_ranks(T, 0, 1, NULL, 0, &Error) == 0);
    mtsched_graph *G1 = mtsched_graph_prepare(T, "one", "cpu", NULL, &Error);
    CHECK(G1 != NULL);
    if (G1) {
      float X[8], Y[8];
      for (int K = 0; K < 8; ++K)
        X[K] = (float)K - 3.5f;
      void *In[1] = {X};
      void *Out[1] = {Y};
      CHECK(mtsched_graph_run(G1, In, Out, NULL, &Error) == 0);
      for (int K = 0; K < 8; ++K)
        CHECK(Y[K] == X[K]);
    }
    mtsched_graph_destroy(G1);
    /* Rank 1 of 2: a two-rank graph does not run on the interpreter. */
    CHECK(mtsched_module_set_ranks(T, 1, 2, Id, sizeof Id, &Error) == 0);
    CHECK(!mtsched_graph_prepare(T, "ar", "cpu", NULL, &Error));
    CHECK(Error && strstr(Error, "the interpreter runs one rank"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(!mtsched_graph_prepare(T, "sub", "cuda", NULL, &Error));
    CHECK(Error && strstr(Error, "group @half"));
    if (Error && !strstr(Error, "group @half"))
      fprintf(stderr, "got: %s\n", Error);
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(!mtsched_graph_prepare(T, "ar", "cuda:x", NULL, &Error));
    CHECK(Error && strstr(Error, "unknown device 'cuda:x'"));
    mtsched_free_error(Error);
    Error = NULL;
    /* A communicator id: made where NCCL is, else the reason; a short
     * buffer and a device without one are errors. */
    char Made[MTSCHED_COMM_ID_BYTES];
    int RC = mtsched_comm_id("cuda", Made, sizeof Made, &Error);
    CHECK(RC == 0 || (Error && *Error));
    if (RC)
      fprintf(stderr, "(expected without NCCL) %s\n", Error);
    /* With the stand-in library (CMakeLists.txt): its id, byte for byte. */
    if (getenv("MTSCHED_TEST_FAKE_NCCL")) {
      CHECK(RC == 0);
      int Same = 1;
      for (int I = 0; I < MTSCHED_COMM_ID_BYTES; ++I)
        Same &= Made[I] == (char)(I * 7 + 3);
      CHECK(Same);
    }
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_comm_id("cuda", Made, 8, &Error) != 0);
    CHECK(Error && strstr(Error, "128 bytes"));
    mtsched_free_error(Error);
    Error = NULL;
    CHECK(mtsched_comm_id("cpu", Made, sizeof Made, &Error) != 0);
    CHECK(Error && strstr(Error, "no communicator"));
    mtsched_free_error(Error);
    Error = NULL;
    mtsched_module_destroy(T);
  }

  /* A parse error names the place; a verifier error too. NULL error
   * pointers are fine. */
  static const char Bad[] = "graph @g(%x: f32[2]) {\n  %y = frob(%x)\n}\n";
  CHECK(!mtsched_module_load(Bad, strlen(Bad), &Error));
  CHECK(Error && strstr(Error, "<module>:2:"));
  mtsched_free_error(Error);
  Error = NULL;
  static const char Wrong[] =
      "graph @g(%x: f32[2,3], %w: f32[4,4]) {\n"
      "  %m = matmul(%x, %w) : f32[2,4]\n  return %m\n}\n";
  CHECK(!mtsched_module_load(Wrong, strlen(Wrong), &Error));
  CHECK(Error && strstr(Error, "error"));
  if (Error)
    fprintf(stderr, "(expected) %s", Error);
  mtsched_free_error(Error);
  CHECK(!mtsched_module_load(Bad, strlen(Bad), NULL));
  mtsched_free_error(NULL);

  if (Failures)
    fprintf(stderr, "%d check(s) failed\n", Failures);
  else
    printf("RuntimeApiCTest: passed\n");
  return Failures != 0;
}
