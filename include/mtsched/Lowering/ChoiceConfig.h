//===- ChoiceConfig.h - Which candidates each op gets -----------*- C++ -*-===//
//
// The candidate lists lowering attaches to multi-template buffers. Users
// change them without recompiling through a JSON choices file (see
// docs/PASSES.md) and --disable-choices.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_CHOICECONFIG_H
#define MTSCHED_LOWERING_CHOICECONFIG_H

#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Runtime/Topology.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mtsched {

/// Which GEMM template a tile instantiates.
enum class GemmTemplate {
  /// mma.sync + ldmatrix + cp.async: any sm_80+ GPU, any dtype.
  MmaSync,
  /// wgmma + TMA with producer/consumer warpgroups: sm_90a, bf16/f16 only.
  Wgmma,
};

struct GemmTileConfig {
  int BM, BN, BK, Warps, Stages;
  GemmTemplate Template = GemmTemplate::MmaSync;
  /// Split-K (mma.sync only): SplitK CTAs per output tile each sum a slice
  /// of K, and the last to finish adds the others' fp32 partials and runs
  /// the epilogue, so a decode GEMM's few tiles fill the GPU.
  int SplitK = 1;
  /// Persistent (wgmma only, `_p` in the name): one CTA per SM walks the
  /// output tiles, so its producer loads the next tile's first k-tiles
  /// while the consumers run the epilogue of the current one.
  bool Persistent = false;
  /// CTAs per thread block cluster (persistent wgmma only, `_c2` in the
  /// name): two CTAs side by side along M, each loading half of the B
  /// tile they share and multicasting it to both, so each SM reads a third
  /// less from L2 for a 128x256 tile.
  int Cluster = 1;
  /// Dynamic (persistent wgmma without clusters, `_p_d` in the name): each
  /// CTA claims its next output tile from a global counter instead of
  /// striding by the grid, so the tiles in flight stay a window of the
  /// grouped order however far some SMs run ahead of others.
  bool Dynamic = false;
  /// Tile rows down each column of the grouped raster (persistent wgmma
  /// only, `_gN` at the end of the name; 0: GroupedRasterRows, 8). The CTAs
  /// in flight share each weight tile across this many row tiles: where it
  /// covers every row tile, each weight is read from memory once.
  int GroupM = 0;
};

/// A wgmma tile: one consumer warpgroup per 64 rows of BM plus the producer
/// warpgroup, so its warps follow from BM.
GemmTileConfig wgmmaTile(int BM, int BN, int BK, int Stages);

/// Why the wgmma template cannot run tile T's shape, or "" where it can: BK
/// is 64 (one 128-byte swizzled row of 16-bit elements), BM and BN are
/// multiples of 64 up to 256, and there are 2 or more stages. The
/// generator and a choices file's tiles ask the same question.
std::string wgmmaTileProblem(const GemmTileConfig &T);

/// A tile of the flash attention template: a CTA of Warps warps computes
/// BQ query rows of one kv head (rows pack the query heads sharing that kv
/// head, then the queries) and streams the keys and values through shared
/// memory BKV at a time. With Splits > 1 (split-KV, for decode) the keys
/// are divided among Splits CTAs per tile, whose partial results the last
/// one to finish combines. Mma tiles (`attn_mma_...`) compute q kᵀ and p v
/// on the tensor cores (mma.sync), a warp per 16 or 32 rows, so BQ = 16 *
/// Warps or 32 * Warps, and stream k and v through Stages shared-memory
/// stages (`_sN` in the name when not 2); the others (`attn_flash_...`) on
/// the CUDA cores. Wgmma tiles (`attn_wg_BQxBKV_sS`, sm_90a) are the
/// Hopper template: a producer warpgroup streams q, k and v with TMA
/// through Stages stages, two consumer warpgroups of 64 rows each multiply
/// with wgmma (Warps is 12, BQ 128, Splits 1); with Overlap (`_o` in the
/// name) a consumer's softmax of one tile runs while the previous tile's
/// p v is in flight (FlashAttention-3's intra-warpgroup pipelining); with
/// PingPong (`_pp`, overlap tiles only) the two consumer warpgroups take
/// turns to issue their products, so one's softmax runs under the other's
/// (FlashAttention-3's pingpong); Persistent (`_p`) launches at most one
/// CTA per SM, each walking query tiles heaviest first in snake order, so
/// its producer loads the next tile's q, k and v while the consumers
/// finish the current one. Persistent on a decode tile (`attn_dec_..._p`):
/// a CTA per SM, each taking an equal share of the flat (batch, kv head,
/// key tile) sequence; the last CTA of a kv head combines its partial
/// results.
struct AttentionTile {
  int BQ, BKV, Warps;
  int Splits = 1;
  bool Mma = false;
  int Stages = 2;
  bool Wg = false;
  bool Overlap = false;
  bool PingPong = false;
  bool Persistent = false;
  /// The Hopper decode template (`attn_dec_...`, AttentionDecodeKernels.cpp):
  /// a TMA producer warp feeding Warps consumer warps of mma.sync.
  bool Dec = false;
  /// A decode tile's splits (2 to 8) form a thread block cluster and
  /// combine through distributed shared memory (`_c`).
  bool Cluster = false;
  /// A decode tile's producer also prefetches the tile this many stage
  /// tiles after each one it loads into L2 (`_pfN`, 0: none).
  int Prefetch = 0;
  /// A decode tile's k and v copies are marked evict-first in L2 (`_ef`):
  /// each is read once.
  bool EvictFirst = false;
  /// A decode tile's CTAs start at different key tiles of their range and
  /// wrap around (`_r`, not persistent): at any moment the (batch, kv head)
  /// CTAs read at different offsets of their caches instead of in step.
  bool Stagger = false;
  /// A persistent decode tile's consumer warps each write a partial result
  /// per kv head and go on, the last writer of a head combining (`_pw`
  /// instead of `_p`): no CTA-wide step at a kv head's end.
  bool WarpPartials = false;
  /// A persistent decode tile's CTAs claim key tiles, a few at a time, from
  /// a counter per kv head, their own kv heads first, then the tiles left
  /// of others (`_ps` instead of `_p`): the SMs that stream faster take the
  /// slower ones' last tiles.
  bool Steal = false;
  /// An unsplit, not persistent decode tile keeps half its stages in
  /// flight until some CTA of the grid has finished, then all (`_t`): the
  /// bytes in flight that are fastest while every CTA streams, and more
  /// for the last CTAs.
  bool Tail = false;
  /// A decode tile's stage of k (and of v) comes by one TMA copy of its
  /// keys' contiguous rows (`_ob`, not persistent, no prefetch): k and v
  /// seen as rows of 64 elements, a key's D / 64 of them consecutive,
  /// instead of D / 64 boxes each striding over every key's row.
  bool OneBox = false;
  /// A decode tile's MMAs take the keys as their 16 rows and the packed
  /// query rows (8 at most) as their 8 columns (`_sw`, not persistent):
  /// half the MMAs of the 16 padded query rows.
  bool SwapAB = false;
};

/// A wgmma attention tile (AttentionTile::Wg): 12 warps, no split.
AttentionTile wgAttentionTile(int BQ, int BKV, int Stages, bool Overlap = false,
                              bool PingPong = false, bool Persistent = false);

struct ChoiceConfig {
  std::vector<GemmTileConfig> GemmTiles;
  /// A split-K tile is offered only when the unsplit grid has fewer tiles
  /// than this (about the SMs of an H100 or H200: a grid that fills them
  /// gains nothing from splitting K).
  int64_t SplitKBelowTiles = 128;
  /// Tiles of the flash attention template; `attn_math` (scores
  /// materialised, softmax, then times v) is offered beside them.
  std::vector<AttentionTile> AttentionTiles;
  /// Tiles of the merged gate+up GEMM (`swiglu`, mma.sync template). BN
  /// counts output columns: a CTA computes BN columns of both the gate and
  /// the up projection, so its accumulators cover 2 * BN.
  std::vector<GemmTileConfig> SwiGluTiles;
  /// Extern library choices offered for every matmul.
  std::vector<std::string> GemmExterns;
  /// Extern choices offered besides those to a matmul of at least
  /// LongGemmMinFlops (2 M N K): cuBLASLt's first heuristic algorithms
  /// (Lowering/CublasLtChoice.h). So long a GEMM runs at the GPU's power
  /// limit, where the heuristic's first pick is not always the fastest
  /// (Megatron's 4096 x 12288 x 49152 on an H200: its 320x128 kernel led in
  /// bursts and trailed a 256x128 one by 1.3% at sustained load). A choices
  /// file's "gemm_externs" lists every extern and clears this list.
  std::vector<std::string> LongGemmExterns;
  double LongGemmMinFlops = 0x1p41; // about 3 ms on an H200
  std::vector<std::string> AllReduce;
  std::vector<std::string> AllGather;
  std::vector<std::string> ReduceScatter;
  std::vector<std::string> AllToAll;
  /// Choice names removed everywhere (also from custom ops' configs).
  llvm::StringSet<> Disabled;
  /// Where the ranks are (--topology=FILE; the default puts every rank on
  /// one host in one NVLink domain), and the file it came from.
  Topology Topo;
  std::string TopologyPath;

  /// The built-in lists.
  static ChoiceConfig getDefault();
  /// Replaces the lists a JSON choices file names; errors name the file and
  /// the offending key.
  llvm::Error loadFile(llvm::StringRef Path);

  /// Candidates for a matmul with the given result problem, pruned to tiles
  /// that fit the shape, then the extern choices. wgmma tiles are offered
  /// only where they can run on an sm_90 GPU: bf16/f16 operands with K and
  /// N multiples of 8 (TMA needs 16-byte row strides).
  std::vector<Choice> gemmChoices(int64_t M, int64_t N, int64_t K,
                                  DType Dtype) const;
  /// Candidates for a merged gate+up GEMM with N output columns: the
  /// SwiGluTiles that fit the shape (bf16/f16 only, like the template).
  /// With BatchedWeights (one [K, N] per batch of M rows, MoE experts)
  /// only the wgmma tiles, which take a batch index in their TMA maps.
  std::vector<Choice> swigluChoices(int64_t M, int64_t N, int64_t K,
                                    DType Dtype,
                                    bool BatchedWeights = false) const;
  /// Candidates for attention S: the flash tiles whose BQ fits the packed
  /// query rows of a kv head (query heads per kv head times queries) and
  /// whose tiles fit in shared memory; split-KV tiles only where one tile
  /// holds all those rows (a decode step) and every split gets at least two
  /// key tiles; then `attn_math`.
  std::vector<Choice> attentionChoices(const AttentionShape &S) const;
  /// Candidates for a built-in collective, as on one host in one NVLink
  /// domain (no hierarchical choice).
  std::vector<Choice> collectiveChoices(CollectiveKind K) const;
  /// Candidates for a built-in collective on a group of GroupRanks, from
  /// what Topo allows: the peer-memory choices (one_shot, two_shot, p2p)
  /// only where the group is in one NVLink domain, `hier` (params `hosts`,
  /// `per_host`: the group's hosts and the most of its ranks on one) only
  /// where it spans hosts.
  std::vector<Choice>
  collectiveChoices(CollectiveKind K, llvm::ArrayRef<int64_t> GroupRanks) const;
  /// The configured, enabled choices of kind K that Topo removes for a
  /// group of GroupRanks named Group, and why (`one_shot, two_shot: group
  /// @tp spans 2 hosts (peer memory needs one NVLink domain)`); empty if
  /// none is removed.
  std::string removedByTopology(CollectiveKind K, llvm::StringRef Group,
                                llvm::ArrayRef<int64_t> GroupRanks) const;
  /// Whether some op can be offered a choice named Name from these lists
  /// (tiles, externs, collective algorithms, `attn_math`), disabled or not.
  bool offers(llvm::StringRef Name) const;
};

/// `gemm_128x64x32_w4_s3`, or `gemm_wg_128x256x64_s4` for a wgmma tile.
std::string gemmChoiceName(const GemmTileConfig &T);
/// The tile a gemm choice's name describes, if it is one.
std::optional<GemmTileConfig> gemmTileOf(const Choice &C);
/// `swiglu_64x128x64_w4_s3`: a merged gate+up GEMM tile.
std::string swigluChoiceName(const GemmTileConfig &T);
/// The tile a swiglu choice's name describes, if it is one.
std::optional<GemmTileConfig> swigluTileOf(const Choice &C);

/// The hierarchical collective: a step inside each host (NVLink), one
/// across hosts (the network), and for all_reduce one more inside.
inline constexpr llvm::StringLiteral HierChoice = "hier";
/// Whether a collective choice loads or stores a peer's memory directly
/// (one_shot, two_shot, p2p), which needs one NVLink domain.
bool isPeerMemoryChoice(llvm::StringRef Name);

/// The decomposed attention: scores, softmax and the product with v.
inline constexpr llvm::StringLiteral AttentionMathChoice = "attn_math";
/// `attn_flash_64x64_w4`, or `attn_flash_16x64_w4_kv8` with 8 key splits:
/// a flash attention tile (`attn_mma_...`, `attn_wg_128x128_s2` for the
/// other templates).
std::string attentionChoiceName(const AttentionTile &T);
/// The tile a flash attention choice's name describes, if it is one.
std::optional<AttentionTile> attentionTileOf(const Choice &C);
/// Whether a decode tile's options go together: a cluster of 2 to 8
/// splits; persistent without splits, a cluster or a stagger; warp
/// partials only persistent, without prefetch; a tail depth only unsplit,
/// not persistent, without prefetch, with an even number of stages whose
/// half is a multiple of the warps. (The shape's limits are
/// decAttentionSupports'.)
bool decTileOptionsValid(const AttentionTile &T);

/// The tile lowering offers for T where a kv head has PackedRows packed
/// query rows: a `_sw` decode tile above the MMA's 8 columns comes as its
/// unswapped twin, else T.
AttentionTile offeredAttentionTile(AttentionTile T, int64_t PackedRows);

} // namespace mtsched

#endif // MTSCHED_LOWERING_CHOICECONFIG_H
