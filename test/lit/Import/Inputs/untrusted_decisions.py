"""mtsched_torch.backend.untrusted_decisions on a decided module written
by hand: which nodes the backend's choice-level check refuses, and why
(the decided IR's timings, the report's reasons where it has them). Then
decisions_of on the same text: it reads the decided lines with the same
parser (backend_base.decided_nodes), every decided node, in order."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamo_stub import install  # noqa: E402

install()
from mtsched_torch.backend import (decisions_of,  # noqa: E402
                                   untrusted_decisions)

TEXT = """group @tp = [0]

graph @g(%x: f32[8,8]) {
  %ok = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] decided extern.cublas timings {t1 = inf, extern.cublas = 4us} : f32[8,8]
  %okf = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] epilogue [%r] decided t1 fused timings {t1 = 3us, extern.cublas = 4us} fused_timings {t1 = 2.5us} : f32[8,8]
  %r = buffer relu(%okf) kernel 0 : f32[8,8]
  %fusedbad = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] epilogue [%s] decided t1 fused timings {t1 = 3us, extern.cublas = 4us} fused_timings {t1 = inf} : f32[8,8]
  %s = buffer relu(%fusedbad) kernel 1 : f32[8,8]
  %bad = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] decided t1 timings {t1 = inf, extern.cublas = inf} : f32[8,8]
  %nobench = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] decided t1 : f32[8,8]
  %pruned = multi_template_buffer matmul(%x, %x) choices [t1, extern.cublas] decided t1 timings {t1 = skipped, extern.cublas = 4us} : f32[8,8]
  %ar = collective_multi_template_buffer all_reduce(%x) {reduce = "sum", group = "tp"} group @tp kind all_reduce choices [nccl, one_shot] decided nccl fallback sync failed : f32[8,8]
  return %ar
}
"""
REPORT = {("@g", "%fusedbad"): {"choices": [
    {"name": "t1", "status": "ok", "fused_message": "fused run failed"}]}}

for report in [None, REPORT]:
    print("report: %s" % ("yes" if report else "no"))
    for graph, node, choice, why in untrusted_decisions(TEXT, report):
        print("%s %s '%s' %s" % (graph, node, choice, why))

print("decisions: %s" % list(decisions_of(TEXT).items()))
