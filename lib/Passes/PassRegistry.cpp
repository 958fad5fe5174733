//===- PassRegistry.cpp ---------------------------------------------------===//
#include "mtsched/Passes/PassRegistry.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;

void PassRegistry::registerPass(PassInfo Info) {
  Passes.push_back(std::move(Info));
}

const PassInfo *PassRegistry::lookup(llvm::StringRef Argument) const {
  for (const PassInfo &P : Passes)
    if (P.Argument == Argument)
      return &P;
  return nullptr;
}

std::string mtsched::nearestName(llvm::StringRef Name,
                                 llvm::ArrayRef<llvm::StringRef> Candidates) {
  unsigned Limit = std::max<unsigned>(2, unsigned(Name.size() / 3));
  unsigned Best = Limit + 1;
  llvm::StringRef Nearest;
  // First of equally near candidates wins: the registration order.
  for (llvm::StringRef C : Candidates) {
    unsigned D = Name.edit_distance(C, /*AllowReplacements=*/true, Best);
    if (D < Best) {
      Best = D;
      Nearest = C;
    }
  }
  return Nearest.str();
}

std::string PassRegistry::nearest(llvm::StringRef Argument) const {
  std::vector<llvm::StringRef> Names{"default"};
  for (const PassInfo &P : Passes)
    Names.push_back(P.Argument);
  return nearestName(Argument, Names);
}

namespace {
/// A recursive-descent reader of mlir-opt's textual pipelines.
class PipelineReader {
public:
  explicit PipelineReader(llvm::StringRef Text) : Text(Text), Rest(Text) {}

  llvm::Error readList(std::vector<PipelineElement> &Out, bool Nested) {
    skipSpace();
    if (Nested && Rest.starts_with(")"))
      return llvm::Error::success(); // builtin.module(): no passes
    while (true) {
      skipSpace();
      if (Rest.empty() || Rest.front() == ',' || Rest.front() == ')')
        return fail("expected a pass name");
      size_t Len = Rest.find_first_of(",(){} \t");
      llvm::StringRef Name = Rest.take_front(Len);
      Rest = Rest.drop_front(Name.size());
      skipSpace();
      if (Rest.consume_front("(")) {
        // An op anchor: the module is the only op passes run on.
        if (Name != "builtin.module" && Name != "any")
          return fail("'" + Name +
                      "(...)': passes run on the whole module only; anchor "
                      "the pipeline on 'builtin.module(...)'");
        if (llvm::Error E = readList(Out, /*Nested=*/true))
          return E;
        skipSpace();
        if (!Rest.consume_front(")"))
          return fail("expected ')'");
      } else {
        PipelineElement El;
        El.Name = Name.str();
        if (Rest.consume_front("{"))
          if (llvm::Error E = readOptions(El))
            return E;
        Out.push_back(std::move(El));
      }
      skipSpace();
      if (Rest.consume_front(","))
        continue;
      if (Rest.empty() || (Nested && Rest.front() == ')'))
        return llvm::Error::success();
      return fail("expected ',' or the end of the pipeline");
    }
  }

private:
  llvm::Error readOptions(PipelineElement &El) {
    while (true) {
      skipSpace();
      if (Rest.consume_front("}"))
        return llvm::Error::success();
      size_t Len = Rest.find_first_of("= \t{}");
      llvm::StringRef Key = Rest.take_front(Len);
      if (Key.empty())
        return fail("expected an option name in '" + El.Name + "{...}'");
      Rest = Rest.drop_front(Key.size());
      if (!Rest.consume_front("="))
        return fail("expected '=' after the option '" + Key + "' of '" +
                    El.Name + "'");
      // A value runs to the next space or the closing brace; braces in it
      // nest (mlir-opt's list values: `a={1,2}`).
      size_t End = 0;
      int Depth = 0;
      for (; End < Rest.size(); ++End) {
        char C = Rest[End];
        if (C == '{')
          ++Depth;
        else if (C == '}' && Depth-- == 0)
          break;
        else if ((C == ' ' || C == '\t') && Depth == 0)
          break;
      }
      if (End == Rest.size())
        return fail("expected '}' to end the options of '" + El.Name + "'");
      llvm::StringRef Value = Rest.take_front(End);
      Rest = Rest.drop_front(End);
      if (Value.size() >= 2 && Value.front() == '{' && Value.back() == '}')
        Value = Value.drop_front().drop_back();
      El.Options.emplace_back(Key.str(), Value.str());
    }
  }

  void skipSpace() { Rest = Rest.ltrim(" \t"); }

  llvm::Error fail(const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "in pipeline '" + Text + "' at offset " +
                                       llvm::Twine(Text.size() - Rest.size()) +
                                       ": " + Msg);
  }

  llvm::StringRef Text;
  llvm::StringRef Rest;
};
} // namespace

llvm::Expected<std::vector<PipelineElement>>
mtsched::parsePipelineText(llvm::StringRef Text) {
  std::vector<PipelineElement> Out;
  if (Text.trim().empty())
    return Out;
  PipelineReader R(Text);
  if (llvm::Error E = R.readList(Out, /*Nested=*/false))
    return std::move(E);
  return Out;
}

void mtsched::printPassList(const PassRegistry &Registry,
                            llvm::raw_ostream &OS) {
  size_t Width = 0;
  for (const PassInfo &P : Registry.getPasses())
    Width = std::max(Width, P.Argument.size());
  for (bool Test : {false, true}) {
    OS << (Test ? "Test passes:\n" : "Passes:\n");
    for (const PassInfo &P : Registry.getPasses())
      if (P.IsTestPass == Test)
        OS << "  --" << llvm::left_justify(P.Argument, Width) << "  "
           << P.Description << '\n';
  }
}
