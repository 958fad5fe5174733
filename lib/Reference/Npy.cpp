//===- Npy.cpp - NumPy .npy files for the inputs and outputs of --run ----===//
#include "mtsched/Reference/Npy.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

static std::string shapeText(llvm::ArrayRef<int64_t> Shape) {
  std::string S = "[";
  for (size_t I = 0; I < Shape.size(); ++I)
    S += (I ? "," : "") + std::to_string(Shape[I]);
  return S + "]";
}

/// The value of key Key in the header dictionary (its text up to the next
/// top-level comma or closing brace), or an empty string.
static llvm::StringRef headerField(llvm::StringRef H, llvm::StringRef Key) {
  std::string Quoted = "'" + Key.str() + "'";
  size_t P = H.find(Quoted);
  if (P == llvm::StringRef::npos)
    return {};
  llvm::StringRef Rest = H.drop_front(P + Quoted.size()).ltrim();
  if (Rest.empty() || Rest.front() != ':')
    return {};
  Rest = Rest.drop_front().ltrim();
  int Depth = 0;
  size_t End = 0;
  for (; End < Rest.size(); ++End) {
    char C = Rest[End];
    if (C == '(' || C == '[')
      ++Depth;
    else if (C == ')' || C == ']')
      --Depth;
    else if ((C == ',' || C == '}') && Depth == 0)
      break;
  }
  return Rest.take_front(End).trim();
}

llvm::Expected<NpyArray> mtsched::readNpy(llvm::StringRef Path) {
  auto BufOr = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!BufOr)
    return err("cannot read '" + Path + "': " + BufOr.getError().message());
  llvm::StringRef B = (*BufOr)->getBuffer();
  auto Bad = [&](const llvm::Twine &Why) {
    return err("'" + Path + "' is not a .npy file numpy writes: " + Why);
  };
  if (B.size() < 10 || B.substr(0, 6) != "\x93NUMPY")
    return Bad("no \\x93NUMPY magic");
  unsigned Major = uint8_t(B[6]);
  size_t HeaderLen, Off;
  if (Major == 1) {
    HeaderLen = uint8_t(B[8]) | (size_t(uint8_t(B[9])) << 8);
    Off = 10;
  } else if (Major == 2 || Major == 3) {
    if (B.size() < 12)
      return Bad("truncated header");
    HeaderLen = 0;
    for (int I = 3; I >= 0; --I)
      HeaderLen = (HeaderLen << 8) | uint8_t(B[8 + I]);
    Off = 12;
  } else {
    return Bad("version " + llvm::Twine(Major));
  }
  if (Off + HeaderLen > B.size())
    return Bad("truncated header");
  llvm::StringRef H = B.substr(Off, HeaderLen);
  NpyArray A;
  llvm::StringRef Descr = headerField(H, "descr");
  if (Descr.size() < 2 || (Descr.front() != '\'' && Descr.front() != '"'))
    return Bad("no 'descr'");
  A.Descr = Descr.drop_front().drop_back().str();
  if (headerField(H, "fortran_order") != "False")
    return Bad("Fortran order (save a C-contiguous array)");
  llvm::StringRef Shape = headerField(H, "shape");
  if (Shape.size() < 2 || Shape.front() != '(' || Shape.back() != ')')
    return Bad("no 'shape'");
  Shape = Shape.drop_front().drop_back();
  llvm::SmallVector<llvm::StringRef, 4> Dims;
  Shape.split(Dims, ',', -1, /*KeepEmpty=*/false);
  int64_t N = 1;
  for (llvm::StringRef D : Dims) {
    int64_t X;
    if (D.trim().getAsInteger(10, X) || X < 0)
      return Bad("shape (" + Shape + ")");
    if (X > 0 && N > (int64_t(1) << 40) / X)
      return Bad("shape (" + Shape + ") has more than 2^40 elements");
    A.Shape.push_back(X);
    N *= X;
  }
  llvm::StringRef T = A.Descr;
  char Order = T.empty() ? '?' : T.front();
  llvm::StringRef Kind = T.drop_front();
  static const struct {
    const char *Kind;
    unsigned Bytes;
  } Known[] = {{"f2", 2}, {"f4", 4}, {"f8", 8}, {"i1", 1}, {"i2", 2},
               {"i4", 4}, {"i8", 8}, {"u1", 1}, {"b1", 1}};
  unsigned Elt = 0;
  for (const auto &K : Known)
    if (Kind == K.Kind)
      Elt = K.Bytes;
  if (!Elt || (Order != '<' && Order != '|' && Order != '='))
    return Bad("element type '" + T +
               "' (little-endian f2, f4, f8, i1-i8, u1 or b1)");
  const char *P = B.data() + Off + HeaderLen;
  if (size_t(B.end() - P) < size_t(N) * Elt)
    return Bad("the data is shorter than the shape " + shapeText(A.Shape));
  bool IntKind = Kind.front() != 'f';
  std::vector<double> F(IntKind ? 0 : N);
  std::vector<int64_t> Ints(IntKind ? N : 0);
  for (int64_t I = 0; I < N; ++I, P += Elt) {
    if (Kind == "f2") {
      uint16_t X;
      std::memcpy(&X, P, 2);
      F[I] = f16ToFloat(X);
    } else if (Kind == "f4") {
      float X;
      std::memcpy(&X, P, 4);
      F[I] = X;
    } else if (Kind == "f8") {
      std::memcpy(&F[I], P, 8);
    } else if (Kind == "i1") {
      Ints[I] = int8_t(*P);
    } else if (Kind == "i2") {
      int16_t X;
      std::memcpy(&X, P, 2);
      Ints[I] = X;
    } else if (Kind == "i4") {
      int32_t X;
      std::memcpy(&X, P, 4);
      Ints[I] = X;
    } else if (Kind == "i8") {
      std::memcpy(&Ints[I], P, 8);
    } else {
      Ints[I] = uint8_t(*P);
    }
  }
  A.Values = IntKind ? HostValues(std::move(Ints)) : HostValues(std::move(F));
  return A;
}

llvm::Error mtsched::writeNpy(llvm::StringRef Path, DType T,
                              llvm::ArrayRef<int64_t> Shape,
                              llvm::ArrayRef<double> Values) {
  std::vector<double> F(Values.begin(), Values.end());
  if (isFloatDType(T))
    return writeNpy(Path, T, Shape, HostValues(std::move(F)));
  std::vector<int64_t> I(F.size());
  for (size_t K = 0; K < F.size(); ++K)
    I[K] = doubleToInt(F[K], T);
  return writeNpy(Path, T, Shape, HostValues(std::move(I)));
}

llvm::Error mtsched::writeNpy(llvm::StringRef Path, DType T,
                              llvm::ArrayRef<int64_t> Shape,
                              const HostValues &Values) {
  const char *Descr = "<f4";
  switch (T) {
  case DType::F16:
    Descr = "<f2";
    break;
  case DType::I32:
    Descr = "<i4";
    break;
  case DType::I64:
    Descr = "<i8";
    break;
  case DType::Bool:
    Descr = "|b1";
    break;
  default:
    break;
  }
  std::string H = "{'descr': '" + std::string(Descr) +
                  "', 'fortran_order': False, 'shape': (";
  for (size_t I = 0; I < Shape.size(); ++I)
    H += std::to_string(Shape[I]) + (Shape.size() == 1 ? "," : "") +
         (I + 1 < Shape.size() ? ", " : "");
  H += "), }";
  // Pad with spaces and end with \n so the data starts 64-byte aligned.
  size_t Total = 10 + H.size() + 1;
  H.append((64 - Total % 64) % 64, ' ');
  H += '\n';
  std::error_code EC;
  llvm::raw_fd_ostream OS(Path, EC, llvm::sys::fs::OF_None);
  if (EC)
    return err("cannot write '" + Path + "': " + EC.message());
  OS << "\x93NUMPY" << char(1) << char(0) << char(H.size() & 0xff)
     << char(H.size() >> 8) << H;
  for (size_t K = 0; K < Values.size(); ++K) {
    switch (T) {
    case DType::F16: {
      uint16_t X = floatToF16(float(Values.getDouble(K)));
      OS.write(reinterpret_cast<const char *>(&X), 2);
      break;
    }
    case DType::I32:
    case DType::I64: {
      // Integers as they are held: exact, wrapped to the type's width.
      int64_t X = Values.isInt() ? wrapInt(Values.ints()[K], T)
                                 : doubleToInt(Values.floats()[K], T);
      if (T == DType::I32) {
        int32_t Y = int32_t(X);
        OS.write(reinterpret_cast<const char *>(&Y), 4);
      } else {
        OS.write(reinterpret_cast<const char *>(&X), 8);
      }
      break;
    }
    case DType::Bool:
      OS << char(Values.isInt() ? Values.ints()[K] != 0
                                : Values.floats()[K] != 0);
      break;
    default: {
      float X = float(roundTo(Values.getDouble(K), T));
      OS.write(reinterpret_cast<const char *>(&X), 4);
      break;
    }
    }
  }
  OS.close();
  if (OS.has_error())
    return err("cannot write '" + Path + "': " + OS.error().message());
  return llvm::Error::success();
}

std::string mtsched::npyPathFor(llvm::StringRef Dir, const Value &V) {
  llvm::SmallString<256> P(Dir);
  llvm::sys::path::append(P, V.getName() + ".npy");
  return std::string(P);
}

llvm::Error mtsched::makeGraphInputs(const Graph &G, const RunIO &IO,
                                     ValueData &Data) {
  if (IO.InputDir.empty()) {
    // An input that indexes an index_select or a scatter draws indices
    // inside the dimension it selects from or writes to (the smallest, if
    // it indexes several).
    std::map<const Value *, int64_t> Bounds;
    auto Bound = [&](const Value *V, int64_t B) {
      auto [It, New] = Bounds.try_emplace(V, B);
      if (!New)
        It->second = std::min(It->second, B);
    };
    for (const auto &N : G.getNodes()) {
      if (std::optional<LayoutPlan> P =
              N->getOp() == OpCode::IndexSelect || N->getOp() == OpCode::Gather
                  ? layoutPlanOf(*N)
                  : std::nullopt)
        Bound(N->getOperand(P->IndexOperand), P->IndexBound);
      // An op unit's index operands (scatter's), by its own rule.
      if (const OpUnitInfo *U = lookupOpUnitInfo(N->getOp());
          U && U->IndexBound)
        for (unsigned I = 0; I < N->getNumOperands(); ++I)
          if (std::optional<int64_t> B = U->IndexBound(*N, I))
            Bound(N->getOperand(I), *B);
    }
    uint64_t Stream = 0;
    for (const auto &In : G.getInputs()) {
      DType T = In->getType().Dtype;
      std::vector<double> V =
          randomValues(In->getType().numElements(), IO.Seed, Stream++, T);
      auto B = Bounds.find(In.get());
      if (B != Bounds.end()) {
        // The same seeded stream, mapped from [-1, 1) onto 0..Bound-1.
        std::vector<double> U = randomValues(In->getType().numElements(),
                                             IO.Seed, Stream - 1, DType::F32);
        for (size_t I = 0; I < V.size(); ++I)
          V[I] = std::min<double>(B->second - 1,
                                  std::floor((U[I] + 1) / 2 * B->second));
      }
      if (isFloatDType(T)) {
        Data[In.get()] = HostValues(std::move(V));
        continue;
      }
      std::vector<int64_t> I(V.size());
      for (size_t K = 0; K < V.size(); ++K)
        I[K] = doubleToInt(V[K], T);
      Data[In.get()] = HostValues(std::move(I));
    }
    return llvm::Error::success();
  }
  llvm::SmallString<256> Dir(IO.InputDir);
  llvm::SmallString<256> Sub(IO.InputDir);
  llvm::sys::path::append(Sub, G.getName());
  if (llvm::sys::fs::is_directory(Sub))
    Dir = Sub;
  for (const auto &In : G.getInputs()) {
    std::string Path = npyPathFor(Dir, *In);
    llvm::Expected<NpyArray> A = readNpy(Path);
    if (!A)
      return llvm::make_error<llvm::StringError>(
          "input '%" + In->getName() + "': " + llvm::toString(A.takeError()),
          llvm::inconvertibleErrorCode());
    const TensorType &T = In->getType();
    if (llvm::ArrayRef<int64_t>(A->Shape) != llvm::ArrayRef<int64_t>(T.Shape))
      return err("'" + Path + "' has shape " + shapeText(A->Shape) +
                 ", but input '%" + In->getName() + "' is " +
                 shapeText(T.Shape));
    if (isFloatDType(T.Dtype)) {
      std::vector<double> F = A->Values.isInt() ? A->Values.toDoubles()
                                                : std::move(A->Values.floats());
      for (double &X : F)
        X = roundTo(X, T.Dtype);
      Data[In.get()] = HostValues(std::move(F));
      continue;
    }
    // An integer input takes integers it can hold, and nothing else: a
    // wrapped or saturated input would make every result a wrong answer.
    bool I32 = T.Dtype == DType::I32;
    std::vector<int64_t> Ints(A->Values.size());
    for (size_t K = 0; K < Ints.size(); ++K) {
      int64_t X;
      if (A->Values.isInt()) {
        X = A->Values.ints()[K];
      } else {
        double D = std::nearbyint(A->Values.floats()[K]);
        // [-2^63, 2^63): the doubles an int64_t holds.
        if (!(D >= -9223372036854775808.0 && D < 9223372036854775808.0))
          return err("'" + Path + "': element " + llvm::Twine(K) + " (" +
                     llvm::formatv("{0}", A->Values.floats()[K]) +
                     ") is not an integer value of " + dtypeName(T.Dtype) +
                     " input '%" + In->getName() + "'");
        X = int64_t(D);
      }
      if (I32 && (X < INT32_MIN || X > INT32_MAX))
        return err("'" + Path + "': element " + llvm::Twine(K) + " (" +
                   llvm::Twine(X) + ") is outside the range of i32 input '%" +
                   In->getName() + "'");
      Ints[K] = X;
    }
    Data[In.get()] = HostValues(std::move(Ints));
  }
  return llvm::Error::success();
}

llvm::Error mtsched::interpretGraphToFiles(const Graph &G, const RunIO &IO,
                                           llvm::raw_ostream &OS) {
  if (std::optional<InterpretRefusal> R =
          checkInterpretable(G, IO.InterpretMaxBytes))
    return err(R->Message);
  ValueData Data;
  if (llvm::Error E = makeGraphInputs(G, IO, Data))
    return E;
  if (llvm::Error E = interpretGraph(G, Data))
    return E;
  for (const Operand &O : G.getOutputs()) {
    const Value *V = O.V;
    HostValues &Out = Data[V];
    double Max = 0;
    if (Out.isInt()) {
      for (int64_t X : Out.ints())
        Max = std::max(Max, std::fabs(double(X)));
    } else {
      for (double &X : Out.floats()) {
        X = roundTo(X, V->getType().Dtype);
        Max = std::max(Max, std::abs(X));
      }
    }
    OS << "interpret @" << G.getName() << ": output %" << V->getName()
       << " computed (" << Out.size() << " elements, max |x| "
       << llvm::formatv("{0:e3}", Max) << ")";
    if (!IO.OutputDir.empty()) {
      std::string Path = npyPathFor(IO.OutputDir, *V);
      if (llvm::Error E =
              writeNpy(Path, V->getType().Dtype, V->getType().Shape, Out))
        return E;
      OS << ", written to " << Path;
    }
    OS << "\n";
  }
  return llvm::Error::success();
}
