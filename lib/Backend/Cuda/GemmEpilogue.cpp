//===- GemmEpilogue.cpp - The epilogue fused into the GEMM templates ------===//
//
// The pointwise chain and final row reduction applied to a GEMM's
// accumulators before the store, shared by the mma.sync, fp32, wgmma and
// SwiGLU templates.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/IR/Layout.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// The index of a value of type Op broadcast over iteration shape Iter at
/// flat index Flat (an expression): right-aligned broadcasting.
static llvm::Expected<std::string> indexAt(const TensorType &Op,
                                           llvm::ArrayRef<int64_t> Iter,
                                           const std::string &Flat) {
  if (Op.numElements() == 1)
    return std::string("0");
  if (llvm::ArrayRef<int64_t>(Op.Shape) == Iter)
    return Flat;
  if (Op.rank() > Iter.size())
    return err("operand of shape " + shapeStr(Op.Shape) +
               " has more dimensions than " + shapeStr(Iter));
  std::string E;
  int64_t IterStride = 1, OpStride = 1;
  for (int D = int(Iter.size()) - 1, OD = int(Op.rank()) - 1; D >= 0;
       --D, --OD) {
    int64_t OpDim = OD >= 0 ? Op.Shape[OD] : 1;
    if (OpDim != 1) {
      if (OpDim != Iter[D])
        return err("operand of shape " + shapeStr(Op.Shape) +
                   " does not broadcast to " + shapeStr(Iter));
      if (!E.empty())
        E += " + ";
      E += "(" + Flat + " / " + std::to_string(IterStride) + "LL % " +
           std::to_string(Iter[D]) + "LL) * " + std::to_string(OpStride) + "LL";
    }
    IterStride *= Iter[D];
    OpStride *= OpDim;
  }
  return "(" + (E.empty() ? std::string("0") : E) + ")";
}

llvm::Expected<EpilogueCode>
codegen::buildEpilogue(const MultiTemplateBufferNode &N, bool Fused,
                       ParamList &P, int64_t Rows, int64_t Inner,
                       bool Resized) {
  EpilogueCode E;
  E.P = &P;
  E.Result = N.getResult();
  if (!Fused)
    return E;
  std::vector<const Node *> Chain = epilogueNodes(N);
  if (Chain.empty())
    return err("'%" + N.getName() + "' has no epilogue to fuse");
  // Members read outside the kernel (the residual sum beside its RMSNorm)
  // are stored where the chain computes them, before the outputs' last.
  llvm::DenseSet<const Value *> Written;
  for (const Operand &W : N.getEpilogueWrites()) {
    Written.insert(W.V);
    P.Outputs.push_back(W.V);
  }
  const Value *Prev = N.getResult();
  const TensorType &Iter = N.getType();
  // Past a layout op (index substitution): the shape later members iterate
  // over, and the flat index in it of the element at (r, c).
  llvm::SmallVector<int64_t, 4> Moved;
  std::string Flat = "(r * " + std::to_string(Inner) + "LL + c)";
  llvm::raw_string_ostream OS(E.Pre);
  for (size_t I = 0; I < Chain.size(); ++I) {
    const Node *C = Chain[I];
    auto Load = [&](const Value *V) -> llvm::Expected<std::string> {
      if (V == Prev)
        return std::string("v");
      P.Inputs.insert(V);
      llvm::Expected<std::string> Idx =
          !Moved.empty()
              ? indexAt(V->getType(), Moved, Flat)
              : indexFor(V->getType(), Rows, Inner, Resized ? nullptr : &Iter);
      if (!Idx)
        return Idx.takeError();
      return loadExpr(V->getType().Dtype, P.name(V), *Idx);
    };
    if (isLayout(C->getOp())) {
      std::optional<ElementMap> Map = elementMapOf(*C);
      if (!Map || C->getOperand(0) != Prev)
        return err("layout op '%" + C->getName() +
                   "' cannot continue the epilogue of '%" + N.getName() +
                   "': only a reshape or transpose of the value before it");
      if (Resized)
        return err("the epilogue of '%" + N.getName() +
                   "' continues through layout op '%" + C->getName() +
                   "', so its rows cannot be resized by a size hint");
      if (!Map->Identity) {
        // Where the element lands: each result dimension's index read off
        // the operand's flat index.
        std::string To;
        for (size_t D = 0; D < Map->Div.size(); ++D) {
          if (Map->Mod[D] == 1)
            continue;
          if (!To.empty())
            To += " + ";
          To += "(" + Flat + " / " + std::to_string(Map->Div[D]) + "LL % " +
                std::to_string(Map->Mod[D]) + "LL) * " +
                std::to_string(Map->Stride[D]) + "LL";
        }
        Flat = "(" + (To.empty() ? std::string("0") : To) + ")";
        E.Permuted = true;
      }
      Moved.assign(C->getType().Shape.begin(), C->getType().Shape.end());
      E.StoreIndex = Flat;
      OS << "        // %" << C->getName() << " = " << C->getOpName()
         << ": later values at index " << Flat << "\n";
      if (Written.erase(C->getResult())) {
        E.PreStores = true;
        OS << "        " << P.name(C->getResult()) << "_out[" << Flat
           << "] = " << storeExpr(C->getType().Dtype, "v") << "; // %"
           << C->getName() << " is read after the kernel\n";
      }
      Prev = C->getResult();
      continue;
    }
    if (isRowReduction(C->getOp()) && !Moved.empty())
      return err("row reduction '%" + C->getName() +
                 "' follows a layout op in the epilogue of '%" + N.getName() +
                 "'");
    if (isRowReduction(C->getOp())) {
      if (I + 1 != Chain.size())
        return err("row reduction '%" + C->getName() +
                   "' must end the epilogue");
      if (C->getOperand(0) != Prev)
        return err("'%" + C->getName() + "' does not normalise '%" +
                   Prev->getName() + "'");
      E.RowNode = C;
      if (C->getOp() == OpCode::RmsNorm || C->getOp() == OpCode::LayerNorm) {
        // layernorm's weight and bias are optional.
        E.RowWeight = "1.f";
        for (unsigned K = 1; K < C->getNumOperands(); ++K) {
          llvm::Expected<std::string> W = Load(C->getOperand(K));
          if (!W)
            return W.takeError();
          (K == 1 ? E.RowWeight : E.RowBias) = *W;
        }
      }
      Prev = C->getResult();
      break;
    }
    if (!isPointwise(C->getOp()))
      return err("'%" + C->getName() + "' cannot be fused into a GEMM");
    std::vector<std::string> Ops;
    for (const Operand &O : C->getOperands()) {
      llvm::Expected<std::string> X = Load(O.V);
      if (!X)
        return X.takeError();
      Ops.push_back(*X);
    }
    llvm::Expected<std::string> X = pointwiseExpr(*C, Ops);
    if (!X)
      return X.takeError();
    OS << "        v = " << *X << "; // %" << C->getName() << " = "
       << C->getOpName() << "\n";
    if (Written.erase(C->getResult())) {
      E.PreStores = true;
      OS << "        " << P.name(C->getResult()) << "_out["
         << (Moved.empty() ? std::string("r * N_ + c") : Flat)
         << "] = " << storeExpr(C->getType().Dtype, "v") << "; // %"
         << C->getName() << " is read after the kernel\n";
    }
    Prev = C->getResult();
  }
  if (!Written.empty())
    return err("the epilogue of '%" + N.getName() +
               "' writes a value that no pointwise member before its end "
               "computes");
  E.Result = Prev;
  return E;
}

void codegen::emitEpilogueTail(llvm::raw_ostream &OS, const EpilogueCode &E,
                               const std::string &OutName, DType OutType,
                               const EpilogueThreads &T) {
  const std::string &In = T.InBounds;
  bool Clamped = T.ClampedAcc && !E.PreStores;
  if (Clamped)
    OS << "  // Epilogue: pointwise chain per element, at indices clamped into "
          "the\n  // output (nothing computed outside it is stored).\n"
       << "  FOR_EACH_ACC_CLAMPED({\n"
       << E.Pre << "  });\n";
  else
    OS << "  // Epilogue: pointwise chain per element.\n"
       << "  FOR_EACH_ACC({\n      if (" << In << ") {\n"
       << E.Pre << "      }\n  });\n";
  if (E.RowNode) {
    bool Soft = E.RowNode->getOp() == OpCode::Softmax;
    std::string Sync = "  " + T.Sync + ";\n";
    OS << "  // Row reduction %" << E.RowNode->getName() << " = "
       << E.RowNode->getOpName() << ": this CTA holds whole rows (N <= BN).\n"
       << Sync << "  float *row_a = (float *)" << T.Scratch
       << ";      // per-row sum\n"
       << "  float *row_b = row_a + BM;           // per-row max\n"
       << "  for (int t = " << T.Tid << "; t < BM; t += " << T.Count << ") {\n"
       << "    row_a[t] = 0.f;\n    row_b[t] = -__int_as_float(0x7f800000);\n"
       << "  }\n"
       << Sync;
    // Adds each accumulator's Term (sum) or folds it with fmaxf (max) into
    // row_a / row_b[rl]; with QuadRowSums, per thread and quad first, so
    // one shared-memory atomic per row and quad instead of per element.
    auto Reduce = [&](const std::string &Term, bool Max,
                      const std::string &Then) {
      const char *Dst = Max ? "row_b" : "row_a";
      if (!T.QuadRowSums) {
        OS << "  FOR_EACH_ACC({ if (" << In << ") { " << Then
           << (Max ? "mt_atomic_max(&" : "atomicAdd(&") << Dst << "[rl], "
           << Term << "); } });\n";
        return;
      }
      std::string Init = Max ? "-__int_as_float(0x7f800000)" : "0.f";
      auto Fold = [&](const std::string &X, const std::string &Y) {
        return Max ? "fmaxf(" + X + ", " + Y + ")" : X + " + " + Y;
      };
      OS << "  {\n    float part[ROW_SLOTS];\n"
         << "    #pragma unroll\n    for (int h = 0; h < ROW_SLOTS; ++h)\n"
         << "      part[h] = " << Init << ";\n"
         << "    FOR_EACH_ACC({ if (" << In << ") { " << Then
         << "part[ROW_SLOT] = " << Fold("part[ROW_SLOT]", Term) << "; } });\n"
         << "    FOR_EACH_ROW_SLOT({\n      float x = part[h];\n"
         << "      x = " << Fold("x", "__shfl_xor_sync(0xffffffffu, x, 1)")
         << ";\n      x = " << Fold("x", "__shfl_xor_sync(0xffffffffu, x, 2)")
         << ";\n"
         << "      if ((lane & 3) == 0 && m0 + rl < M_)\n        "
         << (Max ? "mt_atomic_max(&" : "atomicAdd(&") << Dst << "[rl], x);\n"
         << "    });\n  }\n";
    };
    if (Soft) {
      Reduce("v", true, "");
      OS << Sync;
      Reduce("v", false, "v = expf(v - row_b[rl]); ");
      OS << Sync << "  FOR_EACH_ACC({ v = v / row_a[rl]; });\n";
    } else {
      if (E.RowNode->getOp() == OpCode::LayerNorm) {
        // The row's mean into row_b, then each value less it, so that the
        // sum of squares below is the variance's (two passes, no
        // E[x^2] - mean^2 cancellation).
        Reduce("v", false, "");
        OS << Sync << "  for (int t = " << T.Tid << "; t < BM; t += " << T.Count
           << ") {\n    row_b[t] = row_a[t] / (float)N_;\n"
           << "    row_a[t] = 0.f;\n  }\n"
           << Sync << "  FOR_EACH_ACC({ v = v - row_b[rl]; });\n";
      }
      Reduce("v * v", false, "");
      std::string Scale = "v = v * rsqrtf(row_a[rl] / (float)N_ + " +
                          flt(epsOf(*E.RowNode)) + ") * " + E.RowWeight +
                          (E.RowBias.empty() ? "" : " + " + E.RowBias) + ";";
      if (T.ClampedAcc)
        OS << Sync << "  FOR_EACH_ACC_CLAMPED({ " << Scale << " });\n";
      else
        OS << Sync << "  FOR_EACH_ACC({ if (" << In << ") " << Scale
           << " });\n";
    }
  }
  if (E.Permuted) {
    OS << "  // Each element at its index in the result, through the "
          "epilogue's "
          "layout ops.\n"
       << "  FOR_EACH_ACC({ if (" << In << ") " << OutName << "["
       << E.StoreIndex << "] = " << storeExpr(OutType, "v") << "; });\n";
    return;
  }
  if (T.TileStore && dtypeBytes(OutType) == 2) {
    OS << "  // The tile through shared memory and a TMA store.\n"
       << "  MT_TILE_STORE((unsigned)" << storeExpr(OutType, "v0")
       << " | ((unsigned)" << storeExpr(OutType, "v1") << " << 16));\n";
    return;
  }
  if (T.PairStores && dtypeBytes(OutType) == 2) {
    OS << "  // Columns c and c + 1 as one 32-bit store (N_ and c are even).\n"
       << "  FOR_EACH_ACC_PAIR({ if (" << In << ") *(unsigned *)&" << OutName
       << "[r * N_ + c] = (unsigned)" << storeExpr(OutType, "v0")
       << " | ((unsigned)" << storeExpr(OutType, "v1") << " << 16); });\n";
    return;
  }
  OS << "  FOR_EACH_ACC({ if (" << In << ") " << OutName
     << "[r * N_ + c] = " << storeExpr(OutType, "v") << "; });\n";
}

void codegen::emitInteriorAndEdgeTails(llvm::raw_ostream &OS,
                                       const EpilogueCode &E,
                                       const std::string &OutName,
                                       DType OutType,
                                       const EpilogueThreads &T) {
  std::string Tail;
  llvm::raw_string_ostream TOS(Tail);
  emitEpilogueTail(TOS, E, OutName, OutType, T);
  // The tail is written for function scope; indent it into the branches.
  std::string Indented;
  for (llvm::StringRef Rest(TOS.str()); !Rest.empty();) {
    auto [Line, Next] = Rest.split('\n');
    Indented += (Line.empty() ? "" : "    ") + Line.str() + "\n";
    Rest = Next;
  }
  OS << "    if (m0 + BM <= M_ && n0 + BN <= N_) {\n#define INTERIOR 1\n"
     << Indented << "#undef INTERIOR\n    } else {\n#define INTERIOR 0\n"
     << Indented << "#undef INTERIOR\n    }\n";
}
