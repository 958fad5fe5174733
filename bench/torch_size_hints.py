"""Size hints through torch.compile(backend="mtsched") on a GPU (PyTorch
2.x, issue 37): one MLP block compiled with
options={"size_hints_m": HINTS}, called at several row counts. Dynamo
recompiles per shape (dynamic=False); the first size is tuned with
--size-hints-m, the sizes the hints cover are decided from its dispatch
tables (mtsched-opt --decisions-from, no benchmark of what they cover),
a size beyond the largest hint is tuned. Each size against eager (bf16
tolerance); then a second process (--second) on the same cache decides a
new size from the first process's tables and finds the others cached.

    python3 bench/torch_size_hints.py --build-dir .device --out DIR
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402

from mtsched_torch.compare import TOLERANCE, errors  # noqa: E402

HINTS = [16, 64, 128]


class MLP(torch.nn.Module):
    """A Llama MLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden=1024, ffn=2816):
        super().__init__()
        self.gate = torch.nn.Linear(hidden, ffn, bias=False)
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def find_opt(build_dir):
    for c in [os.path.join(build_dir, "bin", "mtsched-opt"),
              os.path.join(build_dir, "tools", "mtsched-opt", "mtsched-opt")]:
        if os.access(c, os.X_OK):
            return c
    raise SystemExit("torch_size_hints: no mtsched-opt under %s" % build_dir)


def run(rows_list, use_options, dev="cuda"):
    from mtsched_torch import backend
    torch.manual_seed(0)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    m = MLP().to(dev, dtype).eval()
    kw = {"options": {"size_hints_m": HINTS}} if use_options else {}
    fast = torch.compile(m, backend="mtsched", dynamic=False, **kw)
    rows_out = []
    for rows in rows_list:
        x = torch.randn(rows, 1024, device=dev, dtype=dtype)
        n0 = len(backend.GRAPHS)
        t0 = time.time()
        with torch.no_grad():
            out = fast(x)
            if dev == "cuda":
                torch.cuda.synchronize()
            first_s = time.time() - t0
            ref = m(x)
        _, nrm = errors(out.float().cpu().numpy(), ref.float().cpu().numpy())
        g = backend.GRAPHS[-1] if len(backend.GRAPHS) > n0 else {}
        rows_out.append({
            "rows": rows, "norm_rel": nrm, "ok": nrm <= TOLERANCE["bf16"],
            "decided": g.get("decided"), "hint": g.get("hint"),
            "hints": g.get("hints"), "tuned": g.get("tuned"),
            "benchmarks_run": g.get("benchmarks_run"),
            "decide_s": g.get("decide_s"), "first_call_s": first_s})
    return {"rows": rows_out, "opt_runs": backend.OPT_RUNS[0],
            "dispatch_runs": backend.DISPATCH_RUNS[0],
            "eager": backend.STATS["eager"], "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--cache")
    ap.add_argument("--rows", default="16,48,100,300")
    ap.add_argument("--second", action="store_true")
    ap.add_argument("--device", default="cuda",
                    help="cpu: the runtime's interpreter path (a check of "
                    "this script, not a benchmark)")
    ap.add_argument("--env", action="store_true",
                    help="hints from MTSCHED_TORCH_SIZE_HINTS, not options")
    a = ap.parse_args()
    os.environ["MTSCHED_BUILD_DIR"] = a.build_dir
    os.environ["MTSCHED_OPT"] = find_opt(a.build_dir)
    os.environ.pop("MTSCHED_RUNTIME_LIB", None)
    cache = a.cache or tempfile.mkdtemp(prefix="mtsched-size-hints-")
    os.environ["MTSCHED_TORCH_CACHE"] = cache
    if a.env:
        os.environ["MTSCHED_TORCH_SIZE_HINTS"] = ",".join(map(str, HINTS))
    res = run([int(r) for r in a.rows.split(",")], not a.env, a.device)
    if a.second:
        print(json.dumps(res))
        return 0
    res["second_process"] = None
    p = subprocess.run([sys.executable, os.path.abspath(__file__),
                        "--build-dir", a.build_dir, "--cache", cache,
                        "--rows", "16,32", "--second", "--device",
                        a.device],
                       stdout=subprocess.PIPE, universal_newlines=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode == 0 and lines:
        res["second_process"] = json.loads(lines[-1])
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "size-hints.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = ["# torch.compile(backend=mtsched) with size hints %s (torch %s)"
          % (HINTS, res["torch"]), "",
          "| process | rows | decided | hint | tuned nodes | benchmarks "
          "| decide s | first call s | norm_rel | ok |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for tag, r in [("first", res)] + ([("second", res["second_process"])]
                                      if res["second_process"] else []):
        for row in r["rows"]:
            ok &= bool(row["ok"])
            md.append("| %s | %d | %s | %s | %s | %s | %.3f | %.3f | %.1e "
                      "| %s |" % (tag, row["rows"], row["decided"],
                                  row["hint"], len(row["tuned"] or {}),
                                  row["benchmarks_run"],
                                  row["decide_s"] or 0, row["first_call_s"],
                                  row["norm_rel"], row["ok"]))
        md.append("")
        md.append("%s process: mtsched-opt runs tuning %d, from dispatch "
                  "tables %d; eager: %s" % (tag, r["opt_runs"],
                                            r["dispatch_runs"], r["eager"]))
        md.append("")
    text = "\n".join(md)
    with open(os.path.join(a.out, "size-hints.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    want = ["mtsched-opt", "dispatch", "dispatch", "mtsched-opt"]
    got = [r["decided"] for r in res["rows"]]
    print("decided as expected (%s): %s" % (want, got == want))
    second = res["second_process"]
    want2 = ["cache", "dispatch"]
    got2 = [r["decided"] for r in second["rows"]] if second else None
    print("second process decided as expected (%s): %s"
          % (want2, got2 == want2))
    return 0 if ok and got == want and got2 == want2 else 1


if __name__ == "__main__":
    sys.exit(main())
