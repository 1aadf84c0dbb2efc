#pragma once
// The dashboard's pages as HTML strings, rendered from UiStore data. Element ids and classes
// follow /work/ui-contract.md's list (the browser tests select by them). Every value from
// the database goes through html_escape.

#include <string>
#include <vector>

#include "ui/ui_store.hpp"

namespace pgjobd::ui {

// What every page needs besides its data.
struct PageContext {
  std::string user;         // shown in #whoami
  bool can_act = false;     // operator: action buttons are rendered
  bool can_logout = false;  // users are configured: a logout button is rendered
  std::string csrf;         // the session's token, in every form
  std::string flash;        // a message for #flash, empty for none
  int refresh_seconds = 5;  // app.js reloads the content this often
  bool schedules_link = false;
};

std::string render_overview(const PageContext& context, const Overview& overview);
// `query` is the jobs list's own query string (the filters), kept in the bulk form's
// return address.
std::string render_jobs(const PageContext& context, const JobFilter& filter, const JobPage& page,
                        const std::string& query);
std::string render_job(const PageContext& context, const JobDetail& job, bool show_payloads);
std::string render_queues(const PageContext& context, const std::vector<QueueInfo>& queues,
                          const std::vector<LimitInfo>& limits);
std::string render_schedules(const PageContext& context,
                             const std::vector<ScheduleInfo>& schedules);
std::string render_audit(const PageContext& context, const std::vector<AuditEntry>& entries);
// `error`: show #login-error (a failed attempt); `user` refills the name field.
std::string render_login(bool error, const std::string& user);
// A page for 400, 403, 404, 500 and 503; `context` null when nobody is logged in.
std::string render_error(const PageContext* context, int status, const std::string& message);

// The last hour's throughput as an inline SVG bar chart (<svg id="throughput-chart">).
std::string render_throughput_chart(const std::vector<MinuteBucket>& buckets);

// Whether each action applies to a job in `status` (the contract's button rules).
bool can_retry(const std::string& status);
bool can_cancel(const std::string& status);

}  // namespace pgjobd::ui
