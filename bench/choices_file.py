#!/usr/bin/env python3
"""What the device scripts under bench/device/ share about choices.

  choices_file.py attn OUT.json [--skip-decode] TOKEN...
      writes a choices file (--choices-file) with the attention tiles the
      tokens name. Two token forms:
        dBKV.W.S.N[c][fP][e][r][t][o][s][p[w|k]]
                                 attn_dec_16xBKV_wW_sS[_kvN][_c][_pfP][_ef]
                                 [_r][_t][_ob][_sw][_p|_pw|_ps] (mBKV.W.S.N: the mma.sync
                                 tile attn_mma_16xBKV_wW_sS[_kvN])
        BQxBKV_sS[_o][_pp][_p]   attn_wg_BQxBKV_sS[_o][_pp][_p]
      --skip-decode leaves the d tokens out (a script whose decode lit test
      hung does not time the decode tiles).
  choices_file.py report REPORT.json OP[,OP...] [--skip NAME,...]
      prints each node of those ops with its choices, fastest first: name,
      microseconds, status and the start of its message.
  choices_file.py not-ok REPORT.json
      prints every choice anywhere in the report whose status is not ok.

A token that parses as neither form is an error (exit 1), so that a typo in a
script's list fails the script rather than timing a different tile.
"""
import json
import re
import sys

DEC = re.compile(
    r"([dm])(\d+)\.(\d+)\.(\d+)\.(\d+)(c?)(?:f(\d+))?(e?)(r?)(t?)(o?)(s?)(p?)([wk]?)")
WG = re.compile(r"(\d+)x(\d+)_s(\d+)((?:_o|_pp|_p)*)")


def attention_tile(token):
    m = DEC.fullmatch(token)
    if m:
        (kind, bkv, warps, stages, splits, cluster, prefetch, ef, stagger,
         tail, one_box, swap, pers, warp_partials) = m.groups()
        if warp_partials and not pers:
            raise ValueError("'w' (warp partials) and 'k' (stealing) need "
                             "'p': %r" % token)
        tile = {"bq": 16, "bkv": int(bkv), "warps": int(warps),
                "stages": int(stages), "splits": int(splits)}
        tile["decode" if kind == "d" else "mma"] = True
        if cluster:
            tile["cluster"] = True
        if prefetch:
            tile["prefetch"] = int(prefetch)
        if ef:
            tile["evict_first"] = True
        if stagger:
            tile["stagger"] = True
        if tail:
            tile["tail_depth"] = True
        if one_box:
            tile["one_box"] = True
        if swap:
            tile["swap_ab"] = True
        if pers:
            tile["persistent"] = True
        if warp_partials == "w":
            tile["warp_partials"] = True
        elif warp_partials == "k":
            tile["steal"] = True
        return tile
    m = WG.fullmatch(token)
    if m:
        flags = m.group(4).split("_")[1:]
        return {"bq": int(m.group(1)), "bkv": int(m.group(2)), "wgmma": True,
                "stages": int(m.group(3)), "overlap": "o" in flags,
                "pingpong": "pp" in flags, "persistent": "p" in flags}
    raise ValueError("not an attention tile token: %r" % token)


def ms_key(choice):
    ms = choice.get("ms")
    return ms if isinstance(ms, (int, float)) else 1e9


def print_report(path, ops, skip):
    report = json.load(open(path))
    for node in report.get("nodes", []):
        if node.get("op") not in ops or node.get("name") in skip:
            continue
        print("  %s (%s) chosen %s:" % (node["name"], node["op"],
                                        node.get("chosen")))
        for c in sorted(node.get("choices", []), key=ms_key):
            ms = c.get("ms")
            shown = "%.1f" % (ms * 1e3) if isinstance(ms, (int, float)) else ms
            message = (" " + c["message"][:100]) if c.get("message") else ""
            print("    %-30s %10s us  %s%s" % (c["name"], shown,
                                               c.get("status"), message))


def print_not_ok(x):
    if isinstance(x, dict):
        if "status" in x and "name" in x and x["status"] != "ok":
            print("not ok:", x["name"], x["status"],
                  str(x.get("message", ""))[:300])
        for v in x.values():
            print_not_ok(v)
    elif isinstance(x, list):
        for v in x:
            print_not_ok(v)


def main(argv):
    if len(argv) >= 3 and argv[0] == "attn":
        out, tokens = argv[1], argv[2:]
        skip_decode = "--skip-decode" in tokens
        tokens = [t for t in tokens if t != "--skip-decode"]
        try:
            tiles = [attention_tile(t) for t in tokens
                     if not (skip_decode and t.startswith("d"))]
        except ValueError as e:
            print("choices_file.py: error: %s" % e, file=sys.stderr)
            return 1
        json.dump({"attention_tiles": tiles}, open(out, "w"))
        return 0
    if len(argv) in (3, 5) and argv[0] == "report":
        skip = argv[4].split(",") if len(argv) == 5 and argv[3] == "--skip" \
            else []
        print_report(argv[1], argv[2].split(","), skip)
        return 0
    if len(argv) == 2 and argv[0] == "not-ok":
        print_not_ok(json.load(open(argv[1])))
        return 0
    print(__doc__, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
