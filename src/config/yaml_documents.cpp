// yaml-cpp 0.7's parser, given a ',' outside [ ] or { } at the start of a document (a file
// holding just ",", found by tests/fuzz/config_fuzz), reports an empty document there and
// stays put: LoadAll then loops forever, building nodes until memory runs out, and a
// daemon reloading such a file on SIGHUP would hang. A first pass that only notes where
// each document starts stops at the first document that starts where the previous one did.
#include "config/yaml_documents.hpp"

#include <yaml-cpp/eventhandler.h>

#include <sstream>

namespace pgjobd::config_detail {
namespace {

class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;

  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

std::vector<YAML::Node> load_all_documents(const std::string& text) {
  std::istringstream input(text);
  YAML::Parser parser(input);
  DocumentStarts starts;
  while (parser.HandleNextDocument(starts)) {
    const std::size_t n = starts.marks.size();
    if (n >= 2 && starts.marks[n - 1].pos == starts.marks[n - 2].pos) {
      throw YAML::ParserException(starts.marks[n - 1],
                                  "unexpected text here (a ',' outside [ ] or { }?)");
    }
  }
  return YAML::LoadAll(text);
}

}  // namespace pgjobd::config_detail
