"""torch.compile(backend="mtsched") on a Llama-3-8B-shaped decoder layer
(one GPU: TP=1), or the zoo's GPT-2 block (nanoGPT's, at GPT-2 small's
sizes), checked against eager and timed beside eager and
torch.compile(mode="max-autotune"); one table.

    python3 examples/torch/compile_backend.py --build-dir build [--size decode]
    python3 examples/torch/compile_backend.py --build-dir build --model gpt2

PyTorch 2.x with CUDA. --build-dir holds tools/mtsched-opt/mtsched-opt and
lib/RuntimeApi/libmtsched_runtime.so (a build tree, or the folder
scripts/gpu-test.sh --pack makes). A graph the backend cannot run goes
back to eager with a warning; the table's status says so (the row is then
eager's time, not mtsched's). Exit status: 0 if every row matches eager.
"""

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "zoo"))

import torch  # noqa: E402

import gallery  # noqa: E402
import models  # noqa: E402
from mtsched_torch import collectives  # noqa: E402
from mtsched_torch.compare import (TOLERANCE, cuda_time_us, errors,  # noqa
                                   init_weights, random_inputs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"),
                   help="where mtsched-opt and libmtsched_runtime.so are")
    p.add_argument("--model", choices=["llama3_8b_layer", "gpt2"],
                   default="llama3_8b_layer")
    p.add_argument("--size", choices=["decode", "prefill"], default="decode")
    p.add_argument("--tokens", type=int, default=None,
                   help="tokens (Llama: default 1 decode, 2048 prefill; "
                   "GPT-2: the sequence, default 1 decode (16 sequences), "
                   "1024 prefill (4 sequences))")
    p.add_argument("--no-inductor", action="store_true",
                   help="skip torch.compile(mode='max-autotune')")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    b = os.path.abspath(a.build_dir)
    os.environ["MTSCHED_BUILD_DIR"] = b
    for name in ["MTSCHED_OPT", "MTSCHED_RUNTIME_LIB"]:
        os.environ.pop(name, None)
    try:
        from mtsched_torch import backend
    except ImportError as e:
        print("compile_backend: the mtsched backend is unavailable: %s" % e,
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("compile_backend: needs a CUDA device", file=sys.stderr)
        return 2
    dev = "cuda"
    torch.manual_seed(a.seed)
    if a.model == "gpt2":
        # The zoo's block as nanoGPT writes it (no KV cache: decode is one
        # new token per sequence), at GPT-2 small's sizes.
        import decoders
        tokens = a.tokens or (1 if a.size == "decode" else 1024)
        batch = 16 if a.size == "decode" else 4
        model = decoders.GPT2Block(n_embd=768, n_head=12, block_size=1024)
        model = model.to(device=dev, dtype=torch.bfloat16)
        specs = [("x", torch.bfloat16, (batch, tokens, 768))]
        title = "GPT-2 small block (the zoo's nanoGPT block), %s (%d x %d " \
            "tokens)" % (a.size, batch, tokens)
    else:
        tokens = a.tokens or (1 if a.size == "decode" else gallery.PREFILL)
        ctx = gallery.CTX if a.size == "decode" else 2 * tokens
        specs = gallery._llama_layer_inputs("8b", tokens, ctx, 1)
        model = models.llama3_8b_layer(world_size=1, device=dev)
        title = "Llama-3-8B decoder layer, TP=1, %s (%d tokens, context " \
            "%d)" % (a.size, tokens, ctx)
    model.eval()
    init_weights(model, a.seed)
    inputs = random_inputs(specs, dev, a.seed)
    rows = []
    with torch.no_grad(), collectives.mode("local"):
        ref = model(*inputs)
        eager_us = cuda_time_us(lambda: model(*inputs))
        rows.append(["eager", None, eager_us, 0.0, "reference"])

        def variant(label, compile_fn):
            torch._dynamo.reset()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                t0 = time.time()
                cm = compile_fn()
                out = cm(*inputs)
                torch.cuda.synchronize()
                first = time.time() - t0
            for x in w:
                print("%s: warning: %s" % (label, x.message), file=sys.stderr)
            _, nrm = errors(out.float().cpu().numpy(),
                            ref.float().cpu().numpy())
            us = cuda_time_us(lambda: cm(*inputs))
            return [label, first, us, nrm,
                    "match" if nrm <= TOLERANCE["bf16"] else "MISMATCH"]

        before = dict(backend.STATS, eager=list(backend.STATS["eager"]))
        n_graphs = len(backend.GRAPHS)
        row = variant("mtsched", lambda: torch.compile(
            model, backend="mtsched", dynamic=False))
        ran = backend.STATS["mtsched"] - before["mtsched"]
        # Where the compile's time went and what it reused (a second run of
        # this example finds the IR, the decisions and the kernels cached).
        for r in backend.GRAPHS[n_graphs:]:
            row[4] += ("; %s: compile %.2f s, IR %s, decided %s, kernels %d "
                       "(%d cached, %d by NVRTC)" % (
                           r["name"], r["compile_s"], r["ir"], r["decided"],
                           r.get("kernels", 0), r.get("kernels_cached", 0),
                           r.get("kernels_compiled", 0)))
        fell = backend.STATS["eager"][len(before["eager"]):]
        if fell:
            row[4] += "; %d graph(s) eager: %s" % (len(fell), "; ".join(fell))
        row[4] += "; %d graph(s) by mtsched" % ran
        rows.append(row)
        if not a.no_inductor:
            rows.append(variant("inductor max-autotune", lambda: torch.compile(
                model, mode="max-autotune", dynamic=False)))
    print("%s, bf16, %s" % (title, torch.cuda.get_device_name()))
    print("| variant | first call s | us/call | vs eager | norm rel err | "
          "status |")
    print("|---|---|---|---|---|---|")
    for label, first, us, nrm, status in rows:
        print("| %s | %s | %.1f | %.2fx | %.1e | %s |" % (
            label, "-" if first is None else "%.1f" % first, us,
            us / eager_us, nrm, status))
    return 0 if all(r[4].startswith(("match", "reference")) for r in rows) \
        else 1


if __name__ == "__main__":
    sys.exit(main())
