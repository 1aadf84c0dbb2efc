#pragma once
// The text a scrape of /metrics would return for a Metrics object, for tests of the
// engine's parts that check their series without an HTTP server.

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <string>

#include "metrics/metrics.hpp"

namespace pgjobd::testing {

inline std::string scrape(const Metrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
}

}  // namespace pgjobd::testing
