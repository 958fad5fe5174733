//===- MeasurementStore.cpp - Memo and cache under the autotuner ----------===//
#include "mtsched/Autotune/MeasurementStore.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;

std::string mtsched::workloadKey(const Workload &W, bool Fused) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << int(W.K) << ':' << W.Gemm.Batch << 'x' << W.Gemm.M << 'x' << W.Gemm.N
     << 'x' << W.Gemm.K << ':' << int(W.Gemm.Dtype) << ':' << int(W.Collective)
     << ':' << W.Bytes << ':' << W.Ranks << ':' << W.InBytes << ':'
     << W.OutBytes;
  if (W.Gemm.RowwiseScales)
    OS << ":rowwise-scales";
  if (W.Ragged)
    OS << ":ragged";
  if (W.Gemm.OperandDtype)
    OS << ":operands:" << int(*W.Gemm.OperandDtype);
  // Attention shapes are not in the GEMM fields: without them two
  // attention nodes of different shapes would share a memo entry.
  if (W.K == Workload::Kind::Attention)
    OS << ":attn:" << W.Attn.B << 'x' << W.Attn.Hq << 'x' << W.Attn.Hkv << 'x'
       << W.Attn.Sq << 'x' << W.Attn.Skv << 'x' << W.Attn.D << ':'
       << W.Attn.Causal << ':' << llvm::format("%a", W.Attn.Scale) << ':'
       << int(W.Attn.Dtype);
  // A masked attention reads more than an unmasked one of its shape.
  if (W.K == Workload::Kind::Attention && W.Attn.HasMask)
    OS << ":mask:" << W.Attn.MaskB << 'x' << W.Attn.MaskH << 'x'
       << W.Attn.MaskSq << ':' << int(W.Attn.MaskDtype);
  // An op unit's problem is its operands and attributes.
  if (W.K == Workload::Kind::OpUnit)
    OS << ":unit:" << W.UnitKey;
  if (Fused)
    OS << ":fused:" << W.Epilogue.NumOps << ':' << W.Epilogue.Elements << ':'
       << W.Epilogue.ExtraInputBytes << ':' << W.Epilogue.FlopsPerElement << ':'
       << W.Epilogue.RowReduction << ':' << W.Epilogue.ExtraWrites;
  return OS.str();
}

std::string mtsched::choiceKey(const std::string &WorkloadKey,
                               const Choice &C) {
  std::string S;
  S.reserve(WorkloadKey.size() + C.Name.size() + 2);
  S += WorkloadKey;
  S += '|';
  S += C.Name;
  if (!C.Params.empty()) {
    llvm::raw_string_ostream OS(S);
    C.Params.print(OS);
  }
  return S;
}

/// The choice of a record of E (what choiceKey appended after the '|')
/// that is neither a choice of N nor the epilogue, or "" if there is none.
/// An entry with a valid checksum can still have been written by hand; a
/// record for an unknown choice would be replayed into the report and the
/// entry rewritten with it.
static std::string unknownChoiceIn(const CacheEntry &E,
                                   const MultiTemplateBufferNode &N,
                                   std::optional<llvm::StringRef> GroupKey) {
  llvm::StringSet<> Known;
  // The epilogue's key ends in the group key (measureEpilogue).
  Known.insert(("<epilogue>" + GroupKey.value_or("")).str());
  for (const Choice &C : N.getChoices())
    Known.insert(llvm::StringRef(choiceKey("", C)).drop_front());
  for (const auto &KV : E.Records) {
    size_t Bar = KV.first.find('|');
    llvm::StringRef Name = Bar == std::string::npos
                               ? llvm::StringRef()
                               : llvm::StringRef(KV.first).substr(Bar + 1);
    if (!GroupKey && Name.starts_with("<epilogue>@"))
      continue;
    if (!Known.count(Name))
      return Name.empty() ? KV.first : Name.str();
  }
  return "";
}

MeasurementStore::MeasurementStore(const AutotuneOptions &Opts) : Opts(Opts) {
  // Injected faults change measurements on purpose: never cache them
  // (Autotuner::Impl::finalize stores nothing under any fault).
  // --cache-only measures nothing, so its replay is unaffected by faults
  // and it still reads the cache (it never writes); rank faults (late,
  // exit, hang) change no measurement, so a warm cache replays under them
  // as it would without them.
  if (!Opts.CacheDir.empty() &&
      (Opts.Faults.onlyRankFaults() || Opts.CacheOnly))
    Cache = std::make_unique<AutotuneCache>(Opts.CacheDir);
}

const AgreedMeasurement *
MeasurementStore::findMemo(const std::string &Key) const {
  auto It = Memo.find(Key);
  return It == Memo.end() ? nullptr : &It->second;
}

void MeasurementStore::remember(const std::string &Key,
                                const AgreedMeasurement &A) {
  Memo[Key] = A;
  record(Key, A);
}

void MeasurementStore::record(const std::string &Key,
                              const AgreedMeasurement &A) {
  if (Active)
    Recording.Records[Key] = {A.Status, A.Us, A.Message};
}

std::string MeasurementStore::lookupEntry(
    const std::string &Key, const MultiTemplateBufferNode &N,
    std::optional<llvm::StringRef> GroupKey, std::string &Warning) {
  AutotuneCache::LookupResult L = Cache->lookup(Key);
  if (L.State == AutotuneCache::LookupState::Hit) {
    std::string Unknown = unknownChoiceIn(L.Entry, N, GroupKey);
    if (!Unknown.empty()) {
      L.State = AutotuneCache::LookupState::Invalid;
      L.Problem = "it has a record for '" + Unknown +
                  "', which is not a choice of '%" + N.getName() + "'";
    }
  }
  if (L.State == AutotuneCache::LookupState::Invalid)
    Warning = "ignoring autotune cache entry '" + Cache->pathFor(Key) +
              "' of '%" + N.getName() + "': " + L.Problem +
              "; it will be rewritten";
  return L.State == AutotuneCache::LookupState::Hit
             ? "H" + L.Entry.serialize(Key)
             : std::string("M");
}

void MeasurementStore::beginNode() {
  Active = false;
  Replay = CacheEntry();
  Recording = CacheEntry();
}

void MeasurementStore::beginReplay(llvm::StringRef Data, llvm::StringRef Key) {
  Active = true;
  if (!Data.consume_front("H"))
    return;
  // Rank 0 parsed these very bytes, so every rank parses them alike.
  llvm::Expected<CacheEntry> E = CacheEntry::parse(Data, Key);
  if (E)
    Replay = std::move(*E);
  else
    llvm::consumeError(E.takeError());
}

bool MeasurementStore::replay(const std::string &Key, AgreedMeasurement &A,
                              bool &Missing) {
  if (!Active)
    return false;
  auto R = Replay.Records.find(Key);
  if (R == Replay.Records.end()) {
    // Nothing to replay and nothing may be measured.
    if (Opts.CacheOnly) {
      Missing = true;
      A.Message = "not in the autotune cache (--cache-only)";
    }
    return false;
  }
  A.Status = R->second.Status;
  A.Us = R->second.Us;
  // Replayed: no rank measured anything this run.
  A.LocalUs = std::numeric_limits<double>::infinity();
  A.Message = R->second.Message;
  remember(Key, A);
  return true;
}

llvm::Error MeasurementStore::storeNode(const std::string &Key) {
  // Keep what the entry held (other heuristics' or hints' measurements).
  for (auto &KV : Recording.Records)
    Replay.Records[KV.first] = KV.second;
  return Cache->store(Key, Replay);
}
