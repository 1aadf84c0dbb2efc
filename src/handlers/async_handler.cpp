// AsyncHandler's blocking call, for callers that run a job on their own thread.
#include <future>

#include "pgjobd/handler.hpp"

namespace pgjobd {

JobResult AsyncHandler::operator()(const Job& job, std::stop_token stop) const {
  std::promise<JobResult> result;
  std::future<JobResult> ended = result.get_future();
  start(job, std::move(stop), [&result](JobResult done) { result.set_value(std::move(done)); });
  return ended.get();
}

}  // namespace pgjobd
