//===- Cache.cpp - The persistent autotune cache --------------------------===//
#include "mtsched/Autotune/Cache.h"
#include "mtsched/Config/Version.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include <cerrno>
#include <cmath>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();
static constexpr llvm::StringLiteral Magic = "mtsched-autotune-cache";

llvm::StringRef mtsched::getMtschedVersion() { return MTSCHED_VERSION_STRING; }

static std::optional<ChoiceStatus> parseStatus(llvm::StringRef S) {
  for (ChoiceStatus C :
       {ChoiceStatus::Ok, ChoiceStatus::Failed, ChoiceStatus::Timeout,
        ChoiceStatus::WrongResult, ChoiceStatus::Skipped})
    if (choiceStatusName(C) == S)
      return C;
  return std::nullopt;
}

std::string CacheEntry::serialize(llvm::StringRef Key) const {
  llvm::json::Array Recs;
  for (const auto &KV : Records) {
    const CacheRecord &R = KV.second;
    llvm::json::Object O{{"measure", KV.first},
                         {"status", choiceStatusName(R.Status)},
                         {"us", std::isfinite(R.Us)
                                    ? llvm::json::Value(R.Us)
                                    : llvm::json::Value(nullptr)}};
    if (!R.Message.empty())
      O["message"] = R.Message;
    Recs.push_back(std::move(O));
  }
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << llvm::json::Value(llvm::json::Object{{"mtsched", getMtschedVersion()},
                                             {"key", Key},
                                             {"records", std::move(Recs)}});
  return OS.str();
}

static llvm::Error bad(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Expected<CacheEntry> CacheEntry::parse(llvm::StringRef Text,
                                             llvm::StringRef Key) {
  llvm::Expected<llvm::json::Value> V = llvm::json::parse(Text);
  if (!V)
    return bad("invalid JSON: " + llvm::toString(V.takeError()));
  const llvm::json::Object *O = V->getAsObject();
  if (!O)
    return bad("not a JSON object");
  std::optional<llvm::StringRef> Version = O->getString("mtsched");
  if (!Version)
    return bad("no mtsched version");
  if (*Version != getMtschedVersion())
    return bad("written by mtsched " + *Version + ", this is " +
               getMtschedVersion());
  std::optional<llvm::StringRef> StoredKey = O->getString("key");
  if (!StoredKey || *StoredKey != Key)
    return bad("written for another key");
  const llvm::json::Array *Recs = O->getArray("records");
  if (!Recs)
    return bad("no records");
  CacheEntry E;
  for (const llvm::json::Value &RV : *Recs) {
    const llvm::json::Object *R = RV.getAsObject();
    if (!R)
      return bad("a record is not an object");
    std::optional<llvm::StringRef> Measure = R->getString("measure");
    std::optional<llvm::StringRef> Status = R->getString("status");
    const llvm::json::Value *Us = R->get("us");
    if (!Measure || !Status || !Us)
      return bad("a record lacks 'measure', 'status' or 'us'");
    CacheRecord C;
    std::optional<ChoiceStatus> S = parseStatus(*Status);
    if (!S)
      return bad("unknown status '" + *Status + "'");
    C.Status = *S;
    if (Us->kind() == llvm::json::Value::Null)
      C.Us = Inf;
    else if (std::optional<double> D = Us->getAsNumber())
      C.Us = *D;
    else
      return bad("'us' is not a number");
    if ((C.Status == ChoiceStatus::Ok) != std::isfinite(C.Us))
      return bad("a record's status and time disagree");
    // A time the IR cannot print as one (it would not parse back).
    if (std::signbit(C.Us))
      return bad("record '" + *Measure + "' has a negative time");
    C.Message = R->getString("message").value_or("").str();
    E.Records[Measure->str()] = std::move(C);
  }
  return E;
}

std::string mtsched::cacheKeyOf(const Module &M, const Graph &G,
                                const MultiTemplateBufferNode &N,
                                const AutotuneOptions &Opts,
                                llvm::StringRef BackendName,
                                llvm::StringRef BackendVersion, int WorldSize) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << "mtsched " << getMtschedVersion() << "\nformat "
     << AutotuneCache::FormatVersion << "\nbackend " << BackendName << ' '
     << BackendVersion << "\ndevice " << Opts.Device.Name << ' '
     << llvm::utohexstr(hashDevice(Opts.Device)) << "\nworld " << WorldSize;
  OS << "\nmeasure runs=" << Opts.BenchRuns << " warmup=" << Opts.WarmupRuns;
  // Times from longer samples are another measurement (the default keeps
  // the entries written before the option).
  if (Opts.SampleUs != 500)
    OS << " sample-us=" << Opts.SampleUs;
  // Simulated times depend on the noise stream too.
  if (BackendName == "sim") {
    OS << " noise=";
    OS.write_hex(llvm::bit_cast<uint64_t>(Opts.SimNoisePct));
    OS << " seed=" << Opts.Seed;
  }
  OS << "\nnode " << N.getKindKeyword() << ' ' << N.getOpName();
  if (!N.getCustomName().empty())
    OS << " \"" << N.getCustomName() << '"';
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    std::vector<int64_t> Ranks = M.groupRanks(C->getGroup(), G.getWorldSize());
    OS << " kind " << collectiveKindName(C->getCollectiveKind()) << " ranks "
       << Ranks.size();
    // A group smaller than the world: which ranks (links differ).
    if (int64_t(Ranks.size()) < WorldSize) {
      OS << " members";
      for (int64_t R : Ranks)
        OS << ' ' << R;
    }
  }
  OS << ' ';
  N.getAttrs().print(OS);
  for (const Operand &O : N.getOperands())
    OS << ' ' << O.V->getType().str();
  OS << " -> " << N.getType().str() << "\nchoices";
  for (const Choice &C : N.getChoices()) {
    OS << ' ' << C.Name;
    C.Params.print(OS);
    OS << ';';
  }
  // The epilogue by its ops, attributes and operand types; which operand
  // carries the chain matters (sub(a, b) is not sub(b, a)).
  OS << "\nepilogue";
  const Value *Prev = N.getResult();
  for (const Operand &E : N.getEpilogue()) {
    const Node *EN = E.V->getDef();
    OS << ' ' << EN->getOpName() << '(';
    for (const Operand &In : EN->getOperands())
      OS << (In.V == Prev ? "^" : In.V->getType().str()) << ',';
    OS << ')';
    EN->getAttrs().print(OS);
    OS << "->" << EN->getType().str() << ';';
    Prev = E.V;
  }
  // Which members the fused kernel also writes.
  OS << " writes " << N.getEpilogueWrites().size();
  return OS.str();
}

std::string AutotuneCache::pathFor(llvm::StringRef Key) const {
  llvm::SmallString<256> P(Dir);
  llvm::sys::path::append(P, "autotune",
                          llvm::utohexstr(llvm::xxHash64(Key), /*LowerCase=*/
                                          true) +
                              ".entry");
  return std::string(P.str());
}

/// Reads the entry at Path into Text. Anyone who can write the directory
/// can put anything there, so the file is opened without blocking (a FIFO
/// would otherwise wait for a writer forever), and only a regular file of
/// at most MaxEntryBytes is read, by its size at open time (a device like
/// /dev/zero never ends). Problem says why an existing file was refused.
static std::error_code readEntryFile(const std::string &Path, std::string &Text,
                                     std::string &Problem) {
  int FD = ::open(Path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (FD < 0)
    return std::error_code(errno, std::generic_category());
  auto Close = llvm::make_scope_exit([FD] { ::close(FD); });
  struct stat St;
  if (::fstat(FD, &St) != 0)
    return std::error_code(errno, std::generic_category());
  if (!S_ISREG(St.st_mode)) {
    Problem = "not a regular file";
    return std::make_error_code(std::errc::invalid_argument);
  }
  if (St.st_size > AutotuneCache::MaxEntryBytes) {
    Problem = "larger than " + std::to_string(AutotuneCache::MaxEntryBytes) +
              " bytes (" + std::to_string(St.st_size) + ")";
    return std::make_error_code(std::errc::file_too_large);
  }
  // Read at most one byte past the size seen: a file that grew meanwhile
  // fails the length check below instead of being read without end.
  Text.resize(size_t(St.st_size) + 1);
  size_t Got = 0;
  while (Got < Text.size()) {
    ssize_t N = ::read(FD, &Text[Got], Text.size() - Got);
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0)
      return std::error_code(errno, std::generic_category());
    if (N == 0)
      break;
    Got += size_t(N);
  }
  Text.resize(Got);
  return {};
}

/// `mtsched-autotune-cache FORMAT\nxxh64 HEX LENGTH\n` then the body.
AutotuneCache::LookupResult AutotuneCache::lookup(llvm::StringRef Key) const {
  LookupResult R;
  std::string Path = pathFor(Key);
  std::string Contents;
  if (std::error_code EC = readEntryFile(Path, Contents, R.Problem)) {
    if (EC != std::errc::no_such_file_or_directory) {
      R.State = LookupState::Invalid;
      if (R.Problem.empty())
        R.Problem = "cannot read it: " + EC.message();
    }
    return R;
  }
  R.State = LookupState::Invalid;
  llvm::StringRef Text = Contents;
  llvm::StringRef Line1, Line2, Rest;
  std::tie(Line1, Rest) = Text.split('\n');
  std::tie(Line2, Rest) = Rest.split('\n');
  llvm::SmallVector<llvm::StringRef, 3> H1, H2;
  Line1.split(H1, ' ');
  Line2.split(H2, ' ');
  if (H1.size() != 2 || H1[0] != Magic) {
    R.Problem = "not a cache entry (bad header)";
    return R;
  }
  unsigned Format = 0;
  if (H1[1].getAsInteger(10, Format) || Format != FormatVersion) {
    R.Problem =
        ("cache format " + H1[1] + ", expected " + llvm::Twine(FormatVersion))
            .str();
    return R;
  }
  uint64_t Sum = 0, Length = 0;
  if (H2.size() != 3 || H2[0] != "xxh64" || H2[1].getAsInteger(16, Sum) ||
      H2[2].getAsInteger(10, Length)) {
    R.Problem = "bad checksum line";
    return R;
  }
  if (Rest.size() != Length) {
    R.Problem = "truncated: " + std::to_string(Rest.size()) + " of " +
                std::to_string(Length) + " bytes";
    return R;
  }
  if (llvm::xxHash64(Rest) != Sum) {
    R.Problem = "checksum mismatch";
    return R;
  }
  llvm::Expected<CacheEntry> E = CacheEntry::parse(Rest, Key);
  if (!E) {
    R.Problem = llvm::toString(E.takeError());
    return R;
  }
  R.State = LookupState::Hit;
  R.Entry = std::move(*E);
  return R;
}

llvm::Error AutotuneCache::store(llvm::StringRef Key,
                                 const CacheEntry &E) const {
  std::string Path = pathFor(Key);
  llvm::StringRef Parent = llvm::sys::path::parent_path(Path);
  if (std::error_code EC = llvm::sys::fs::create_directories(Parent))
    return bad("cannot create '" + Parent + "': " + EC.message());
  std::string Body = E.serialize(Key);
  int FD;
  llvm::SmallString<256> Tmp;
  if (std::error_code EC =
          llvm::sys::fs::createUniqueFile(Path + ".%%%%%%%%.tmp", FD, Tmp))
    return bad("cannot create a file next to '" + Path + "': " + EC.message());
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << Magic << ' ' << FormatVersion << "\nxxh64 "
       << llvm::utohexstr(llvm::xxHash64(Body), /*LowerCase=*/true) << ' '
       << Body.size() << '\n'
       << Body;
    OS.close();
    if (OS.has_error()) {
      std::string Msg = OS.error().message();
      OS.clear_error();
      llvm::sys::fs::remove(Tmp);
      return bad("cannot write '" + Tmp + "': " + Msg);
    }
  }
  if (std::error_code EC = llvm::sys::fs::rename(Tmp, Path)) {
    llvm::sys::fs::remove(Tmp);
    return bad("cannot rename '" + Tmp + "' to '" + Path +
               "': " + EC.message());
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> mtsched::resolveCacheDir(llvm::StringRef FlagDir,
                                                     bool NoCache,
                                                     bool CacheOnly) {
  if (NoCache && CacheOnly)
    return bad("--no-cache and --cache-only contradict each other");
  if (NoCache && !FlagDir.empty())
    return bad("--no-cache and --cache-dir contradict each other");
  if (NoCache)
    return std::string();
  std::string Dir = FlagDir.str();
  // A directory the user named must work; the default one may not exist on
  // this machine (no HOME, read-only home): then the run goes on uncached,
  // unless it can only replay.
  bool Explicit = !Dir.empty() || CacheOnly;
  if (Dir.empty()) {
    std::optional<std::string> Env =
        llvm::sys::Process::GetEnv("MTSCHED_CACHE");
    if (Env && (*Env == "off" || *Env == "0") && !CacheOnly)
      return std::string();
    if (std::optional<std::string> EnvDir =
            llvm::sys::Process::GetEnv("MTSCHED_CACHE_DIR");
        EnvDir && !EnvDir->empty()) {
      Dir = *EnvDir;
      Explicit = true;
    } else {
      llvm::SmallString<256> P;
      if (!llvm::sys::path::cache_directory(P)) {
        if (Explicit)
          return bad("cannot find the user's cache directory; pass "
                     "--cache-dir");
        llvm::WithColor::warning()
            << "cannot find the user's cache directory; running without the "
               "autotune cache (pass --cache-dir or --no-cache)\n";
        return std::string();
      }
      llvm::sys::path::append(P, "mtsched");
      Dir = std::string(P.str());
    }
  }
  // --cache-only never writes the cache, so it never creates the directory
  // either: a missing one is an empty cache, in which every node is a miss.
  // Said once here, before each node's error says it again.
  if (CacheOnly) {
    llvm::sys::fs::file_status Status;
    std::error_code EC = llvm::sys::fs::status(Dir, Status);
    if (EC == std::errc::no_such_file_or_directory) {
      llvm::WithColor::warning()
          << "cache directory '" << Dir
          << "' does not exist: the cache is empty (--cache-only does not "
             "create it)\n";
      return Dir;
    }
    if (!EC && Status.type() != llvm::sys::fs::file_type::directory_file)
      EC = std::make_error_code(std::errc::not_a_directory);
    if (EC)
      return bad("cannot use cache directory '" + Dir + "': " + EC.message());
    return Dir;
  }
  std::error_code EC = llvm::sys::fs::create_directories(Dir);
  if (!EC && !llvm::sys::fs::is_directory(Dir))
    EC = std::make_error_code(std::errc::not_a_directory);
  if (EC) {
    if (Explicit)
      return bad("cannot create cache directory '" + Dir +
                 "': " + EC.message());
    llvm::WithColor::warning()
        << "cannot create cache directory '" << Dir << "': " << EC.message()
        << "; running without the autotune cache\n";
    return std::string();
  }
  return Dir;
}
