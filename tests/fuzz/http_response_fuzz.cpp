// Fuzzes PlainHttpResponse, the http handler's own client's parser of whatever an HTTP peer
// sends (src/handlers/plain_http.hpp). The first byte seeds how the rest is split into
// reads; the same bytes are fed whole to a second parser. However a response is split, it
// must read the same: the same outcome, status, headers, body and bytes used. The body kept
// never passes its bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "handlers/plain_http.hpp"
#include "text/head_buffer.hpp"

namespace {

using pgjobd::HeadBuffer;
using pgjobd::PlainHttpResponse;
using Progress = PlainHttpResponse::Progress;

constexpr std::size_t kBodyBound = 64;

struct Reading {
  PlainHttpResponse response;
  HeadBuffer body{kBodyBound};
  Progress progress = Progress::kMore;
  std::size_t used = 0;  // of the bytes fed, up to the end of the response
};

// Feeds `data` in reads of 1 to 16 bytes chosen by `seed` (or whole when seed is 0), as a
// connection delivers them, until the response ends or fails; then the end of the stream.
void read_all(Reading& reading, std::string_view data, std::uint32_t seed) {
  while (!data.empty() && reading.progress == Progress::kMore) {
    std::size_t size = data.size();
    if (seed != 0) {
      seed = seed * 1103515245U + 12345U;
      size = std::min<std::size_t>(size, 1 + ((seed >> 16) % 16));
    }
    std::size_t used = 0;
    reading.progress = reading.response.feed(data.substr(0, size), reading.body, used);
    if (reading.progress == Progress::kError) return;
    FUZZ_CHECK(used <= size);
    if (reading.progress == Progress::kMore) FUZZ_CHECK(used == size);
    reading.used += used;
    data.remove_prefix(size);
  }
  if (reading.progress == Progress::kMore) reading.progress = reading.response.end_of_stream();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Reading split;
  Reading whole;
  read_all(split, bytes, 1U + data[0]);
  read_all(whole, bytes, 0);
  FUZZ_CHECK(split.progress == whole.progress);
  FUZZ_CHECK(split.response.error() == whole.response.error());
  FUZZ_CHECK(split.body.bytes().size() <= kBodyBound);
  if (whole.progress != Progress::kDone) return 0;
  FUZZ_CHECK(split.used == whole.used);
  FUZZ_CHECK(split.response.status() == whole.response.status());
  FUZZ_CHECK(split.response.status() >= 100 && split.response.status() <= 999);
  FUZZ_CHECK(split.response.keep_alive() == whole.response.keep_alive());
  FUZZ_CHECK(split.response.content_type() == whole.response.content_type());
  FUZZ_CHECK(split.response.retry_after() == whole.response.retry_after());
  FUZZ_CHECK(split.body.bytes() == whole.body.bytes());
  FUZZ_CHECK(split.body.total() == whole.body.total());
  FUZZ_CHECK(split.response.body_bytes() == split.body.total());
  return 0;
}
