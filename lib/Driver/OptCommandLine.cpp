//===- OptCommandLine.cpp - mtsched-opt's command line --------------------===//
//
// Every mtsched-opt flag, grouped by topic, and their translation into the
// plain OptMainConfig that optMain runs. The flags other tools take too
// come from lib/Tools (ToolOptions.h).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/OptCommandLine.h"
#include "mtsched/Autotune/Cache.h"
#include "mtsched/Driver/OptMain.h"
#include "mtsched/Driver/PassOptionFlags.h"
#include "mtsched/Driver/RankRunner.h"
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Support/Version.h"
#include "mtsched/Tools/ToolOptions.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdio>

using namespace llvm;
using namespace mtsched;

// Options are grouped by topic so that --help reads like a table of
// contents (mlir-opt does the same with its categories).
static cl::OptionCategory
    PipelineCat("Input and pipeline options",
                "What to read and which passes to run; IR dumps go to stderr");
static cl::OptionCategory
    TuneCat("Autotuning options",
            "Choices, fusion heuristics and how choices are timed");
static cl::OptionCategory
    BackendCat("Backend options",
               "Where choices are timed: the simulator or CUDA");
static cl::OptionCategory
    RanksCat("Ranks and fault options",
             "Ranks, the pre-sync, timeouts and fault injection");
static cl::OptionCategory
    CacheCat("Cache options", "The persistent autotune cache (docs/CACHE.md)");
static cl::OptionCategory OutputCat("Output options",
                                    "The printed IR or graph, reports, traces, "
                                    "kernels and the summary on stderr");

static cl::opt<std::string> InputFile(cl::Positional, cl::desc("<input file>"),
                                      cl::init("-"), cl::cat(PipelineCat));
static cl::opt<bool> SplitInputFile(
    "split-input-file",
    cl::desc("Process each '// -----' separated case on its own"),
    cl::cat(PipelineCat));
static cl::opt<bool> VerifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check diagnostics against expected-error comments"),
    cl::cat(PipelineCat));
// Not cl::CommaSeparated: commas inside mlir-opt's `builtin.module(a,b)`
// and `pass{opt=v}` are the pipeline's own (parsePipelineText splits).
static cl::list<std::string> Pipeline(
    "pipeline",
    cl::desc("Comma-separated passes to run (also -p, --pass-pipeline, and "
             "mlir-opt's 'builtin.module(a,b{opt=v})')"),
    cl::value_desc("pass,..."), cl::cat(PipelineCat));
static cl::opt<bool>
    PrintIRAfterAll("print-ir-after-all",
                    cl::desc("Print the IR after every pass (stderr)"),
                    cl::cat(PipelineCat));
static cl::list<std::string> PrintIRAfter(
    "print-ir-after", cl::desc("Print the IR after these passes (stderr)"),
    cl::CommaSeparated, cl::value_desc("pass"), cl::cat(PipelineCat));
static cl::opt<bool>
    VerifyEach("verify-each", cl::init(true),
               cl::desc("Run the verifier after every pass (default on)"),
               cl::cat(PipelineCat));
static cl::opt<bool> FreeOnExit(
    "free-on-exit", cl::Hidden,
    cl::desc("Destroy the autotuning sessions (GPU memory, kernels, NCCL "
             "communicators) and run static destructors before exiting; by "
             "default the OS reclaims them, which is faster"),
    cl::cat(OutputCat));
static cl::opt<bool> TimePasses("time-passes",
                                cl::desc("Report the time of every pass"),
                                cl::cat(PipelineCat));
static cl::opt<bool>
    DumpPassPipeline("dump-pass-pipeline",
                     cl::desc("Print the pipeline to stderr before running"),
                     cl::cat(PipelineCat));

static cl::alias PassPipelineAlias("pass-pipeline",
                                   cl::desc("Alias for --pipeline"),
                                   cl::aliasopt(Pipeline),
                                   cl::cat(PipelineCat));
static cl::alias PAlias("p", cl::desc("Alias for --pipeline"),
                        cl::aliasopt(Pipeline), cl::cat(PipelineCat));
// mlir-opt's and opt's spellings of the IR printing and timing flags
// (docs/PASSES.md). Hidden: --help lists each flag once.
static cl::alias MlirPrintAfterAll("mlir-print-ir-after-all",
                                   cl::desc("Alias for --print-ir-after-all"),
                                   cl::aliasopt(PrintIRAfterAll), cl::Hidden);
static cl::alias PrintAfterAll("print-after-all",
                               cl::desc("Alias for --print-ir-after-all"),
                               cl::aliasopt(PrintIRAfterAll), cl::Hidden);
static cl::alias MlirPrintAfter("mlir-print-ir-after",
                                cl::desc("Alias for --print-ir-after"),
                                cl::aliasopt(PrintIRAfter), cl::Hidden);
static cl::alias PrintAfter("print-after",
                            cl::desc("Alias for --print-ir-after"),
                            cl::aliasopt(PrintIRAfter), cl::Hidden);
static cl::alias MlirTiming("mlir-timing", cl::desc("Alias for --time-passes"),
                            cl::aliasopt(TimePasses), cl::Hidden);
static cl::opt<bool> ListPasses("list-passes",
                                cl::desc("List the passes and exit"),
                                cl::cat(PipelineCat));
static cl::opt<bool>
    PrintIRBeforeAll("print-ir-before-all",
                     cl::desc("Print the IR before every pass (stderr)"),
                     cl::cat(PipelineCat));
static cl::list<std::string> PrintIRBefore(
    "print-ir-before", cl::desc("Print the IR before these passes (stderr)"),
    cl::CommaSeparated, cl::value_desc("pass"), cl::cat(PipelineCat));
static cl::opt<bool> PrintIRAfterChange(
    "print-ir-after-change",
    cl::desc("Print the IR after a pass only if the pass changed it; alone, "
             "after every pass that changed it (stderr)"),
    cl::cat(PipelineCat));
static cl::opt<bool> PrintIRAfterFailure(
    "print-ir-after-failure",
    cl::desc("Print the IR as a failing pass left it (stderr)"),
    cl::cat(PipelineCat));
static cl::alias MlirPrintBeforeAll("mlir-print-ir-before-all",
                                    cl::desc("Alias for --print-ir-before-all"),
                                    cl::aliasopt(PrintIRBeforeAll), cl::Hidden);
static cl::alias PrintBeforeAll("print-before-all",
                                cl::desc("Alias for --print-ir-before-all"),
                                cl::aliasopt(PrintIRBeforeAll), cl::Hidden);
static cl::alias MlirPrintBefore("mlir-print-ir-before",
                                 cl::desc("Alias for --print-ir-before"),
                                 cl::aliasopt(PrintIRBefore), cl::Hidden);
static cl::alias PrintBefore("print-before",
                             cl::desc("Alias for --print-ir-before"),
                             cl::aliasopt(PrintIRBefore), cl::Hidden);
static cl::alias
    MlirPrintAfterChange("mlir-print-ir-after-change",
                         cl::desc("Alias for --print-ir-after-change"),
                         cl::aliasopt(PrintIRAfterChange), cl::Hidden);
static cl::alias PrintChanged("print-changed",
                              cl::desc("Alias for --print-ir-after-change"),
                              cl::aliasopt(PrintIRAfterChange), cl::Hidden);
static cl::alias
    MlirPrintAfterFailure("mlir-print-ir-after-failure",
                          cl::desc("Alias for --print-ir-after-failure"),
                          cl::aliasopt(PrintIRAfterFailure), cl::Hidden);
static cl::opt<CollectiveMode>
    Mode("collective-mode", cl::desc("When multi-template buffers are decided"),
         cl::values(clEnumValN(CollectiveMode::Deferred, "deferred",
                               "V2: by the scheduler, one pre-sync for all "
                               "collectives (default)"),
                    clEnumValN(CollectiveMode::Immediate, "immediate",
                               "V1: while lowering, one sync per collective")),
         cl::init(CollectiveMode::Deferred), cl::cat(TuneCat));
static cl::opt<std::string> FusionHeuristicName(
    "fusion-heuristic",
    cl::desc("benchmark (default), cost-model, always or never"),
    cl::init("benchmark"), cl::cat(TuneCat));
static cl::opt<double> FusionSpeedupThreshold(
    "fusion-speedup-threshold",
    cl::desc("Fuse only if unfused/fused time is at least this (default 1.0)"),
    cl::init(1.0), cl::cat(TuneCat));
static cl::opt<double> TieTolerance(
    "tie-tolerance",
    cl::desc("Choices within this fraction of the fastest are tied and the "
             "first listed wins, so that choices within measurement noise "
             "do not swap from run to run (default 0.01; 0: the fastest)"),
    cl::init(0.01), cl::cat(TuneCat));

static ChoiceToolOptions ChoiceOpts(TuneCat);
static cl::opt<unsigned> BenchRuns("bench-runs",
                                   cl::desc("Timed runs per measurement "
                                            "(median taken; default 10)"),
                                   cl::init(10), cl::cat(TuneCat));
static cl::opt<unsigned>
    WarmupRuns("warmup-runs", cl::desc("Untimed warm-up runs (default 2)"),
               cl::init(2), cl::cat(TuneCat));
static cl::opt<unsigned> BenchSampleUs(
    "bench-sample-us",
    cl::desc("Device time one timed sample covers at least, in back-to-back "
             "launches (default 500; a prefill layer's kernels at the clock "
             "the GPU sustains under load need tens of ms)"),
    cl::init(500), cl::cat(TuneCat));
static cl::list<int64_t> SizeHintsM(
    "size-hints-m",
    cl::desc("Matmul rows (M) to tune for, each with its own winner"),
    cl::CommaSeparated, cl::value_desc("m,..."), cl::cat(TuneCat));
static cl::list<int64_t> SizeHintsBytes(
    "size-hints-bytes",
    cl::desc("Collective message sizes in bytes to tune for, each with its "
             "own winner"),
    cl::CommaSeparated, cl::value_desc("bytes,..."), cl::cat(TuneCat));
static cl::opt<std::string> DecisionsFrom(
    "decisions-from",
    cl::desc("Decide each matmul from the dispatch table of the node of the "
             "same name in this decided module (--size-hints-m) instead of "
             "benchmarking it, where the table covers its rows; the rest "
             "is tuned as usual"),
    cl::value_desc("file"), cl::cat(TuneCat));
// One list read as rows and as bytes tuned all-reduces of tp=8 layers at
// 4 KB when M=4096 was meant; it is kept only to say what replaced it.
static cl::list<std::string> OldSizeHints("size-hints", cl::CommaSeparated,
                                          cl::Hidden, cl::cat(TuneCat));
enum class SplitTuningMode { Off, On, Nodes };
static cl::opt<SplitTuningMode> SplitTuning(
    "split-tuning",
    cl::desc("With several ranks, each rank times a share of the "
             "non-collective nodes and the ranks exchange the times "
             "(default nodes)"),
    cl::values(clEnumValN(SplitTuningMode::Nodes, "nodes",
                          "deal whole nodes out to the ranks, measured "
                          "before any is decided, with one exchange: the "
                          "choices a decision compares are timed on one GPU "
                          "(default)"),
               clEnumValN(SplitTuningMode::On, "on",
                          "split each node's choices among the ranks: "
                          "faster on graphs of few nodes, but a node's "
                          "choices are compared across GPUs"),
               clEnumValN(SplitTuningMode::Off, "off",
                          "every rank times every choice; the slowest "
                          "rank's time counts")),
    cl::init(SplitTuningMode::Nodes), cl::cat(TuneCat));
static cl::opt<unsigned> PruneTopK(
    "prune-top-k",
    cl::desc("Benchmark only the K choices the cost model ranks best, per "
             "node and size hint, and the best of each kind of kernel; "
             "choices it cannot price or ties with the K-th are measured "
             "too (default 3; 0: all)"),
    cl::init(3), cl::value_desc("K"), cl::cat(TuneCat));

static BackendToolOptions BackendOpts(BackendCat, {/*SimNoisePct=*/0,
                                                   /*Seed=*/0});
static cl::opt<unsigned> CompileThreads(
    "compile-threads",
    cl::desc("NVRTC threads of the cuda backend (default: hardware threads, "
             "at most 32)"),
    cl::init(0), cl::cat(BackendCat));
static cl::opt<std::string> KernelCacheDir(
    "kernel-cache-dir",
    cl::desc("Where compiled kernels are cached (default: the user cache "
             "directory + /mtsched/kernels; 'none' for no cache)"),
    cl::value_desc("dir"), cl::cat(BackendCat));
static cl::opt<bool>
    RunGraph("run",
             cl::desc("Run the decided graph on the GPU, check every output "
                      "against the fp64 interpreter and time the graph"),
             cl::cat(BackendCat));
static cl::opt<std::string> RunInputs(
    "run-inputs",
    cl::desc("--run / --interpret: read each graph input %x from DIR/x.npy "
             "(or DIR/<graph>/x.npy) instead of random values"),
    cl::value_desc("DIR"), cl::cat(BackendCat));
static cl::opt<std::string> RunOutputs(
    "run-outputs",
    cl::desc("--run / --interpret: write each graph output %y to DIR/y.npy "
             "(DIR/<graph>/y.npy when the file has several graphs)"),
    cl::value_desc("DIR"), cl::cat(BackendCat));
static cl::opt<unsigned> RunTimeSamples(
    "run-time-samples",
    cl::desc("--run: samples of the whole decided graph's time (default 10; "
             "0: do not time it)"),
    cl::init(10), cl::cat(BackendCat));
static cl::opt<bool> RunCheck(
    "run-check",
    cl::desc("--run: check every output against the fp64 interpreter "
             "(default true; --run-check=false when another reference, such "
             "as PyTorch, checks the --run-outputs files)"),
    cl::init(true), cl::cat(BackendCat));
static cl::opt<bool> Interpret(
    "interpret",
    cl::desc("Evaluate the printed graph with the fp64 interpreter on the CPU "
             "(no GPU; custom ops are an error)"),
    cl::cat(BackendCat));
static cl::opt<unsigned long> InterpretMaxBytes(
    "interpret-max-bytes",
    cl::desc("--interpret: the interpreter's memory budget in bytes (8 an "
             "element of every value, plus the largest value once more); a "
             "graph needing more is refused before anything is allocated "
             "(default: a quarter of the physical memory)"),
    cl::value_desc("bytes"), cl::cat(BackendCat));
static cl::opt<int> Ranks("ranks",
                          cl::desc("Ranks to run as threads (default: the "
                                   "graph's world_size; under mpirun, the "
                                   "MPI size)"),
                          cl::init(0), cl::cat(RanksCat));
static cl::opt<unsigned> PreSyncTimeoutMs(
    "pre-sync-timeout-ms",
    cl::desc("Arrival deadline of the pre-sync: how long the first rank "
             "waits for the last one (default 5000)"),
    cl::init(5000), cl::cat(RanksCat));
static cl::opt<std::string> PreSyncShape(
    "pre-sync",
    cl::desc("Shape of the pre-sync's agreement: flat (one all-gather of "
             "every rank's record), hier (per host, then across host "
             "leaders; MPI ranks make those communicators at start) or auto "
             "(hier from --pre-sync-hier-ranks ranks or across hosts; "
             "default)"),
    cl::init("auto"), cl::value_desc("flat|hier|auto"), cl::cat(RanksCat));
static cl::opt<unsigned> PreSyncHierRanks(
    "pre-sync-hier-ranks",
    cl::desc("With --pre-sync=auto, the rank count from which the "
             "agreement is hierarchical (default 256)"),
    cl::init(256), cl::cat(RanksCat));
static cl::opt<unsigned> AgreementTimeoutMs(
    "agreement-timeout-ms",
    cl::desc("How long ranks in step wait for each other: the pre-sync's "
             "agreement after the arrival deadline, and the margin past "
             "--choice-timeout-ms when timings are exchanged (default 2000)"),
    cl::init(2000), cl::cat(RanksCat));
static cl::opt<unsigned> ChoiceTimeoutMs(
    "choice-timeout-ms",
    cl::desc("A choice running longer is excluded (default 30000)"),
    cl::init(30000), cl::cat(RanksCat));
static cl::opt<SyncFailurePolicy> OnSyncFailure(
    "on-sync-failure",
    cl::desc("What a failed pre-sync does to nodes that cannot be measured"),
    cl::values(clEnumValN(SyncFailurePolicy::Fallback, "fallback",
                          "decide them by the fallback rules and say so on "
                          "stderr (default)"),
               clEnumValN(SyncFailurePolicy::Error, "error",
                          "stop with an error (exit status 1)")),
    cl::init(SyncFailurePolicy::Fallback), cl::cat(RanksCat));
static cl::opt<std::string> CollectiveFallback(
    "collective-fallback",
    cl::desc("Choice a collective falls back to (default: its first)"),
    cl::cat(RanksCat));
static cl::list<std::string>
    Inject("inject", cl::desc("Inject a fault (see docs/PASSES.md)"),
           cl::value_desc("spec"), cl::cat(RanksCat));
static cl::opt<std::string> CacheDir(
    "cache-dir",
    cl::desc("Autotune cache directory (default: $MTSCHED_CACHE_DIR, else "
             "the user's cache directory + /mtsched)"),
    cl::value_desc("dir"), cl::cat(CacheCat));
static cl::opt<bool> NoCache("no-cache",
                             cl::desc("Neither read nor write the autotune "
                                      "cache"),
                             cl::cat(CacheCat));
static cl::opt<bool> CacheOnly(
    "cache-only",
    cl::desc("Replay every decision from the cache without benchmarking; "
             "a missing entry is an error"),
    cl::cat(CacheCat));
static cl::opt<std::string> OutputFile("o", cl::desc("Output file"),
                                       cl::value_desc("filename"),
                                       cl::init("-"), cl::cat(OutputCat));
static cl::opt<std::string> ReportFile("report",
                                       cl::desc("Write a JSON report"),
                                       cl::value_desc("file"),
                                       cl::cat(OutputCat));
static cl::opt<std::string>
    TraceFile("trace", cl::desc("Write a Chrome trace of the autotuning"),
              cl::value_desc("file"), cl::cat(OutputCat));
static cl::opt<std::string>
    DumpKernels("dump-kernels",
                cl::desc("Write each generated kernel's CUDA C++ to DIR"),
                cl::value_desc("DIR"), cl::cat(OutputCat));
static cl::opt<bool>
    Quiet("quiet",
          cl::desc("No progress line and no autotune summary on stderr"),
          cl::cat(OutputCat));
using EmitKind = OutputSteps::EmitKind;
static cl::opt<EmitKind>
    Emit("emit", cl::desc("What is printed after the passes"),
         cl::values(clEnumValN(EmitKind::IR, "ir", "the IR (default)"),
                    clEnumValN(EmitKind::Dot, "dot",
                               "a Graphviz graph: fused kernels as clusters, "
                               "decisions and times on the nodes"),
                    clEnumValN(EmitKind::Timeline, "timeline",
                               "the decided schedule as Chrome/Perfetto "
                               "trace JSON: a process per rank, compute and "
                               "comm tracks, each kernel and collective at "
                               "its time")),
         cl::init(EmitKind::IR), cl::cat(OutputCat));
static cl::opt<cl::boolOrDefault> AutotuneSummary(
    "autotune-summary",
    cl::desc("Print every decided node's choices, sorted by time, on stderr "
             "after tuning (default: on when stderr is a terminal)"),
    cl::cat(OutputCat));
static void fail(const Twine &Msg) {
  // Messages may quote a choices file or a flag's value byte for byte.
  reportToolError(escapeControlBytes(Msg.str()));
  exit(1);
}

/// cl::CommaSeparated splits a list flag's values but not its aliases'.
static std::vector<std::string> splitCommas(const cl::list<std::string> &L) {
  std::vector<std::string> Out;
  for (const std::string &V : L) {
    SmallVector<StringRef, 4> Parts;
    StringRef(V).split(Parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
    for (StringRef P : Parts)
      Out.push_back(P.trim().str());
  }
  return Out;
}

static std::string didYouMean(const PassRegistry &Registry, StringRef Name) {
  std::string Near = Registry.nearest(Name);
  return Near.empty() ? "" : "; did you mean '" + Near + "'?";
}

/// The passes --pipeline (and its aliases) name, in order, each pass's
/// options applied to their flags.
static std::vector<std::string> readPipelines(const PassRegistry &Registry) {
  std::vector<std::string> Requested;
  for (const std::string &Text : Pipeline) {
    Expected<std::vector<PipelineElement>> Elements = parsePipelineText(Text);
    if (!Elements)
      fail(toString(Elements.takeError()));
    for (const PipelineElement &E : *Elements) {
      // An unknown pass is reported with the others by expandPipeline; its
      // options would only add noise.
      if (Registry.lookup(E.Name))
        for (const auto &[Key, Value] : E.Options)
          if (Error Err = applyPassOption(E.Name, Key, Value))
            fail(toString(std::move(Err)));
      Requested.push_back(E.Name);
    }
  }
  return Requested;
}

/// The ranks', the autotuner's and the cache's flags into Config, in the
/// order their errors are reported.
static void readTuningFlags(OptMainConfig &Config) {
  if (Ranks < 0 || Ranks > OptMainConfig::MaxRanks)
    fail("--ranks must be between 1 and " + Twine(OptMainConfig::MaxRanks));
  Config.NumRanks = Ranks;
  Config.ReportFile = ReportFile;
  Config.TraceFile = TraceFile;
  AutotuneOptions &Tune = Config.Pipe.Autotune;
  // Ranks that see different hosts must not tune together (the pre-sync
  // compares this); ChoiceOpts read the topology file before.
  const LoweringOptions &Lower = Config.Pipe.Lowering;
  if (!Lower.Choices.Topo.isDefault())
    Tune.TopologyFingerprint = Lower.Choices.Topo.fingerprint();
  Tune.CompileThreads = CompileThreads;
  Tune.KernelCacheDir = KernelCacheDir;
  if (Error E = BackendOpts.apply(Tune))
    fail(toString(std::move(E)));
  // Each run is a sample kept in memory: bound them like every other input.
  if (BenchRuns == 0 || BenchRuns > 100000)
    fail("--bench-runs must be between 1 and 100000");
  if (WarmupRuns > 100000)
    fail("--warmup-runs must be at most 100000");
  Tune.BenchRuns = BenchRuns;
  Tune.WarmupRuns = WarmupRuns;
  if (BenchSampleUs == 0 || BenchSampleUs > 10000000)
    fail("--bench-sample-us must be between 1 and 10000000");
  Tune.SampleUs = BenchSampleUs;
  Tune.PreSyncTimeout = std::chrono::milliseconds(PreSyncTimeoutMs);
  if (PreSyncShape != "flat" && PreSyncShape != "hier" &&
      PreSyncShape != "auto")
    fail("--pre-sync must be flat, hier or auto, not '" + PreSyncShape + "'");
  Tune.PreSyncShape = PreSyncShape;
  if (PreSyncHierRanks < 2)
    fail("--pre-sync-hier-ranks must be at least 2");
  Tune.PreSyncHierRanks = PreSyncHierRanks;
  if (ChoiceTimeoutMs == 0)
    fail("--choice-timeout-ms must be at least 1");
  Tune.ChoiceTimeout = std::chrono::milliseconds(ChoiceTimeoutMs);
  if (AgreementTimeoutMs == 0)
    fail("--agreement-timeout-ms must be at least 1");
  Tune.AgreementTimeout = std::chrono::milliseconds(AgreementTimeoutMs);
  Tune.OnSyncFailure = OnSyncFailure;
  Tune.CollectiveFallback = CollectiveFallback;
  if (OldSizeHints.getNumOccurrences())
    fail("--size-hints was removed: it read one list as matmul rows and as "
         "collective bytes; use --size-hints-m=M,... for matmuls and "
         "--size-hints-bytes=BYTES,... for collectives");
  auto ReadHints = [](const cl::list<int64_t> &In, StringRef Flag,
                      std::vector<int64_t> &Out) {
    for (int64_t H : In) {
      if (H <= 0)
        fail(Flag + " must be positive");
      Out.push_back(H);
    }
    llvm::sort(Out);
    Out.erase(std::unique(Out.begin(), Out.end()), Out.end());
  };
  ReadHints(SizeHintsM, "--size-hints-m", Tune.SizeHintsM);
  ReadHints(SizeHintsBytes, "--size-hints-bytes", Tune.SizeHintsBytes);
  Config.DecisionsFromFile = DecisionsFrom;
  for (const std::string &Spec : Inject)
    if (Error E = Tune.Faults.add(Spec))
      fail(toString(std::move(E)));
  Tune.Progress = !Quiet;
  // Like the progress line, the summary is for a person at a terminal;
  // --autotune-summary forces it on (tests), =false off.
  Config.AutotuneSummary = AutotuneSummary == cl::BOU_UNSET
                               ? !Quiet && errs().is_displayed()
                               : AutotuneSummary == cl::BOU_TRUE;
  Expected<std::string> Dir = resolveCacheDir(CacheDir, NoCache, CacheOnly);
  if (!Dir)
    fail(toString(Dir.takeError()));
  Tune.CacheDir = *Dir;
  Tune.CacheOnly = CacheOnly;
  Tune.PruneTopK = PruneTopK;
  Tune.SplitTuning = SplitTuning != SplitTuningMode::Off;
  Tune.SplitByNode = SplitTuning == SplitTuningMode::Nodes;
}

/// What is printed or run after the pipeline (the output steps); the
/// autotuner's device is read from Config.
static void readOutputFlags(OptMainConfig &Config) {
  if ((!RunInputs.empty() || !RunOutputs.empty()) && !RunGraph && !Interpret)
    fail("--run-inputs and --run-outputs need --run or --interpret");
  if (InterpretMaxBytes.getNumOccurrences() && !Interpret)
    fail("--interpret-max-bytes needs --interpret");
  if (!RunInputs.empty() && !sys::fs::is_directory(RunInputs))
    fail("--run-inputs: '" + RunInputs + "' is not a directory");
  if (Emit == EmitKind::Dot && SplitInputFile)
    fail("--emit=dot prints one graph; it does not combine with "
         "--split-input-file");
  if (Emit == EmitKind::Timeline && SplitInputFile)
    fail("--emit=timeline prints one trace; it does not combine with "
         "--split-input-file");
  OutputSteps &Steps = Config.Output;
  Steps.Emit = Emit;
  Steps.Device = Config.Pipe.Autotune.Device;
  Steps.DumpKernelsDir = DumpKernels;
  Steps.CompileThreads = CompileThreads;
  Steps.KernelCacheDir = KernelCacheDir;
  Steps.Interpret = Interpret;
  Steps.InterpretMaxBytes = InterpretMaxBytes.getNumOccurrences()
                                ? uint64_t(InterpretMaxBytes)
                                : defaultInterpretMaxBytes();
  Steps.Run = RunGraph;
  Steps.InputDir = RunInputs;
  Steps.OutputDir = RunOutputs;
  Steps.Seed = BackendOpts.getSeed();
  Steps.TimeSamples = RunTimeSamples;
  Steps.Check = RunCheck;
}

int mtsched::optMainFromCommandLine(int argc, char **argv) {
  PassRegistry Registry;
  registerAllPasses(Registry);

  // One flag per pass (`--lower`); their order on the command line is the
  // order they run in, after any --pipeline.
  std::vector<std::unique_ptr<cl::opt<bool>>> PassFlags;
  for (const PassInfo &P : Registry.getPasses())
    PassFlags.push_back(std::make_unique<cl::opt<bool>>(
        StringRef(P.Argument), cl::desc(P.Description), cl::cat(PipelineCat)));

  cl::HideUnrelatedOptions(
      {&PipelineCat, &TuneCat, &BackendCat, &RanksCat, &CacheCat, &OutputCat});
  setToolVersionPrinter("mtsched-opt");
  cl::ParseCommandLineOptions(
      argc, argv, "mtsched-opt: ML graph scheduler and autotuner\n");
  if (ListPasses) {
    printPassList(Registry, outs());
    return 0;
  }
  // First: pass options set flags that the rest reads.
  std::vector<std::string> Requested = readPipelines(Registry);

  OptMainConfig Config;
  Config.InputFile = InputFile;
  Config.OutputFile = OutputFile;
  Config.SplitInputFile = SplitInputFile;
  Config.VerifyDiagnostics = VerifyDiagnostics;
  Config.DumpPassPipeline = DumpPassPipeline;
  Config.PMOptions.VerifyEach = VerifyEach;
  Config.PMOptions.PrintBeforeAll = PrintIRBeforeAll;
  Config.PMOptions.PrintAfterAll = PrintIRAfterAll;
  Config.PMOptions.PrintAfterChange = PrintIRAfterChange;
  Config.PMOptions.PrintAfterFailure = PrintIRAfterFailure;
  Config.PMOptions.TimePasses = TimePasses;
  for (const std::string &P : splitCommas(PrintIRBefore))
    Config.PMOptions.PrintBefore.insert(P);
  for (const std::string &P : splitCommas(PrintIRAfter))
    Config.PMOptions.PrintAfter.insert(P);

  LoweringOptions &Lower = Config.Pipe.Lowering;
  Lower.Mode = Mode;
  FusionOptions &Fusion = Config.Pipe.Fusion;
  if (Error E = ChoiceOpts.apply(Lower, Fusion))
    fail(toString(std::move(E)));
  // optMain builds the heuristic once and reports a name it does not know.
  Fusion.Heuristic = FusionHeuristicName;
  if (!(FusionSpeedupThreshold > 0))
    fail("--fusion-speedup-threshold must be positive");
  Fusion.SpeedupThreshold = FusionSpeedupThreshold;
  if (!(TieTolerance >= 0 && TieTolerance < 1))
    fail("--tie-tolerance must be in [0, 1)");
  Fusion.TieTolerance = TieTolerance;

  readTuningFlags(Config);

  std::vector<std::pair<unsigned, std::string>> Flagged;
  for (const auto &F : PassFlags)
    if (F->getNumOccurrences())
      Flagged.emplace_back(F->getPosition(), F->ArgStr.str());
  llvm::sort(Flagged);
  for (auto &F : Flagged)
    Requested.push_back(F.second);
  if (!expandPipeline(Registry, Requested, Config.Pipeline))
    return 1;
  for (const std::string &P : splitCommas(PrintIRAfter))
    if (!Registry.lookup(P))
      fail("unknown pass '" + P + "' in --print-ir-after" +
           didYouMean(Registry, P));
  for (const std::string &P : splitCommas(PrintIRBefore))
    if (!Registry.lookup(P))
      fail("unknown pass '" + P + "' in --print-ir-before" +
           didYouMean(Registry, P));
  readOutputFlags(Config);
  // Sanitizer builds destroy everything, so that LeakSanitizer and TSan
  // still see the teardown.
  Config.DisableFree = !FreeOnExit && !LLVM_ADDRESS_SANITIZER_BUILD &&
                       !LLVM_THREAD_SANITIZER_BUILD &&
                       !LLVM_MEMORY_SANITIZER_BUILD;
  // Under mpirun, MPI_Finalize (or the way out without it) comes last.
  int Code = finishRankProcess(optMain(Config));
  if (!Config.DisableFree)
    return Code;
  // As lld's exitLld(): every output is written and closed, so the process
  // ends without running static destructors or the CUDA driver's, cuBLAS's
  // and NCCL's exit handlers: with the sessions left to the OS this took
  // another 0.03-0.1 s of a 2-rank run.
  llvm::llvm_shutdown();
  llvm::outs().flush();
  llvm::errs().flush();
  std::fflush(nullptr);
  llvm::sys::Process::Exit(Code, /*NoCleanup=*/true);
}
