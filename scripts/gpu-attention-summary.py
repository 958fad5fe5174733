#!/usr/bin/env python3
"""Sets the attention choices mtsched timed (the decided IR of
bench/attention-llama3.mir) beside PyTorch's scaled_dot_product_attention
(bench/peers/torch_sdpa.py's JSON), one row per shape, as a Markdown table.

  scripts/gpu-attention-summary.py DECIDED.mir TORCH.json
"""
import json
import re
import sys


def choices(path):
    out, graph = {}, None
    for line in open(path):
        m = re.match(r"graph @(\w+)", line)
        if m:
            graph = m.group(1)
        m = re.search(r"decided (\S+) timings \{([^}]*)\}", line)
        if m and graph and "attention(" in line:
            t = {}
            for kv in m.group(2).split(","):
                name, us = kv.split("=")
                us = us.strip().removesuffix("us")
                t[name.strip()] = float(us)
            out[graph] = (m.group(1), t)
    return out


def main():
    mt = choices(sys.argv[1])
    torch = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {}
    print(f"PyTorch {torch.get('torch', '?')} on {torch.get('device', '?')}"
          f" (enable_gqa: {torch.get('enable_gqa', '?')})\n")
    print("| shape | decided | tensor-core tile (best) | CUDA-core tile (best) "
          "| attn_math | SDPA default "
          "| SDPA flash | SDPA efficient | SDPA cudnn | decided / SDPA |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else f"{x:.1f}"

    def best(t, prefix):
        tiles = {k: v for k, v in t.items() if k.startswith(prefix)}
        if not tiles:
            return "-"
        b = min(tiles, key=tiles.get)
        return f"{fmt(tiles[b])} ({b})"

    for g, (dec, t) in mt.items():
        r = torch.get(g, {})
        sd = r.get("sdpa_us")
        ratio = t[dec] / sd if sd else None
        print(f"| {g} | {dec} {t[dec]:.1f} us | "
              f"{best(t, 'attn_mma_')} | {best(t, 'attn_flash_')} | "
              f"{fmt(t.get('attn_math'))} | {fmt(sd)} | "
              f"{fmt(r.get('sdpa_flash_attention_us'))} | "
              f"{fmt(r.get('sdpa_efficient_attention_us'))} | "
              f"{fmt(r.get('sdpa_cudnn_attention_us'))} | "
              f"{'-' if ratio is None else f'{ratio:.2f}x'} |")


if __name__ == "__main__":
    main()
