#!/usr/bin/env bash
# f32_router.sh IN OUT: the imported Mixtral MoE (bench/moe/mixtral_moe_t*.mir)
# with its router (gate GEMM, softmax, top-2, renormalisation) in f32, the
# weights cast back to bf16 for the combine; the experts are untouched.
# In bf16 a token whose 2nd and 3rd logits are within a bf16 step can be
# routed to another expert on the GPU than in the fp64 reference, and its
# row then differs for that reason alone: at T = 128 about one token a run.
set -eu
sed -E \
  -e 's/^  %mm = matmul\(%x, %gate\.weight\) : bf16\[([0-9]+),8\]$/  %x.f32 = cast(%x) : f32[\1,4096]\n  %gate.f32 = cast(%gate.weight) : f32[4096,8]\n  %mm = matmul(%x.f32, %gate.f32) : f32[\1,8]/' \
  -e '/^  %(_softmax |topk\.values,|sum_1 )/s/bf16\[/f32[/' \
  -e 's/^  %div = div\(%topk\.values, %sum_1\) : bf16\[([0-9]+),2\]$/  %div.f32 = div(%topk.values, %sum_1) : f32[\1,2]\n  %div = cast(%div.f32) : bf16[\1,2]/' \
  "$1" > "$2"
