// Server-rendered pages. Each function builds one page's <main>; layout() wraps it with the
// navigation, the flash message and the asset links. Every database value is escaped here,
// at the point where it meets HTML, and nowhere else.
#include "ui/pages.hpp"

#include <string>

#include "text/utf8.hpp"
#include "ui/html.hpp"

namespace pgjobd::ui {
namespace {

std::string esc(const std::string& text) { return html_escape(text); }

// Pages stay under 150 KB whatever a job holds: payloads may be megabytes, a job may have
// thousands of attempts, and escaping can make text six times longer ('"' → "&quot;").
// These bound each part as it appears in the page, escaped.
constexpr std::size_t kMaxPayloadShown = 48 * 1024;
constexpr std::size_t kMaxResultShown = 24 * 1024;
constexpr std::size_t kMaxErrorShown = 1000;
constexpr std::size_t kMaxAttemptsShown = 20;
constexpr std::size_t kMaxDetailShown = 500;
// The jobs list shows up to 200 rows: its cells get a little each (the job page has all).
constexpr std::size_t kMaxListTypeShown = 100;
constexpr std::size_t kMaxListQueueShown = 60;
constexpr std::size_t kMaxListErrorShown = 100;
// Payloads and results are indented this many levels at most (deeper ones on one line).
constexpr int kMaxJsonIndent = 32;

// `text` escaped, cut to at most `limit` bytes of HTML (never inside an entity or a UTF-8
// sequence), with a note of the full size when cut.
std::string esc_short(const std::string& text, std::size_t limit) {
  std::string html = html_escape(text);
  if (html.size() <= limit) return html;
  std::size_t end = utf8_cut(html, limit);
  const std::size_t amp = html.rfind('&', end);
  if (amp != std::string::npos && html.find(';', amp) >= end) end = amp;
  html.resize(end);
  return html + " … (" + format_thousands(static_cast<std::int64_t>(text.size())) +
         " bytes in all)";
}

// A payload or result, indented, escaped and bounded by `limit` bytes of text (before
// escaping; esc_short bounds it after), with a note of what was left out.
std::string json_shown(const std::string& json, bool cut_by_store, std::size_t limit) {
  const PrettyJson pretty = pretty_json(json, limit, kMaxJsonIndent);
  std::string html = esc_short(pretty.text, limit);
  if (pretty.cut || cut_by_store) {
    html += "\n… (cut: the page shows the first " +
            format_thousands(static_cast<std::int64_t>(limit)) + " bytes)";
  }
  if (pretty.flattened) {
    html += "\n(levels deeper than " + std::to_string(kMaxJsonIndent) + " are shown on one line)";
  }
  return html;
}

std::string cell(const std::string& text, const std::string& css_class = "") {
  return (css_class.empty() ? "<td>" : "<td class=\"" + css_class + "\">") + esc(text) + "</td>";
}

std::string csrf_field(const PageContext& context) {
  return R"(<input type="hidden" name="csrf" value=")" + esc(context.csrf) + "\">";
}

std::string back_field(const std::string& back) {
  return R"(<input type="hidden" name="back" value=")" + esc(back) + "\">";
}

std::string layout(const PageContext* context, const std::string& page, const std::string& title,
                   const std::string& main) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>" +
      esc(title) +
      " · pgjobd</title><link rel=\"stylesheet\" href=\"/ui/app.css\">"
      "<script src=\"/ui/app.js\" defer></script></head>\n<body data-page=\"" +
      page + "\"";
  if (context != nullptr && page != "login") {
    html += " data-refresh=\"" + std::to_string(context->refresh_seconds) + "\"";
  }
  html += ">\n";
  if (context != nullptr) {
    html += R"(<header><nav id="nav"><span class="brand">pgjobd</span>)";
    const auto link = [&](const char* id, const char* href, const char* text, const char* name) {
      html += std::string("<a id=\"") + id + "\" href=\"" + href + "\"" +
              (page == name ? " class=\"current\"" : "") + ">" + text + "</a>";
    };
    link("nav-overview", "/", "Overview", "overview");
    link("nav-jobs", "/jobs", "Jobs", "jobs");
    link("nav-queues", "/queues", "Queues", "queues");
    if (context->schedules_link) link("nav-schedules", "/schedules", "Schedules", "schedules");
    link("nav-audit", "/audit", "Audit", "audit");
    html += R"(<span class="who"><span id="whoami">)" + esc(context->user) + "</span>";
    if (!context->can_act) html += " <span class=\"role\">(read-only)</span>";
    if (context->can_logout) {
      html += R"(<form method="post" action="/logout" class="logout-form">)" +
              csrf_field(*context) +
              R"(<button type="submit" id="logout-button">Log out</button></form>)";
    }
    html += "</span></nav></header>\n";
  }
  html += "<main id=\"main\">\n";
  if (context != nullptr && !context->flash.empty()) {
    html += R"(<p id="flash" role="status">)" + esc(context->flash) + "</p>\n";
  }
  html += main;
  html += "</main>\n</body></html>\n";
  return html;
}

std::string status_badge(const std::string& status) {
  // The class is only ever one of the known statuses: anything else gets no class.
  for (const std::string_view known : kJobStatuses) {
    if (status != known) continue;
    std::string badge = "<span class=\"status status-";
    badge += status;
    badge += "\">";
    badge += status;
    badge += "</span>";
    return badge;
  }
  return "<span class=\"status\">" + esc(status) + "</span>";
}

std::string job_link(std::int64_t id) {
  const std::string text = std::to_string(id);
  return "<a href=\"/jobs/" + text + "\">" + text + "</a>";
}

// A job's parents or children: a table of the first ones, and how many there are. Nothing
// for a job without any.
std::string render_links(const char* title, const char* table_id, const std::vector<JobLink>& links,
                         const BoundedCount& total, bool with_parent_status) {
  if (links.empty()) return {};
  std::string html = std::string("<h2>") + title + "</h2><table id=\"" + table_id +
                     "\"><thead><tr><th>Id</th><th>Type</th><th>Status</th>" +
                     (with_parent_status ? "<th>Ended as</th>" : "") + "</tr></thead><tbody>\n";
  for (const JobLink& link : links) {
    html += "<tr data-job-id=\"" + std::to_string(link.id) + R"("><td class="num">)" +
            job_link(link.id) + "</td><td class=\"type\">" +
            esc_short(link.type, kMaxListTypeShown) + "</td><td class=\"job-status\">" +
            (link.status.empty() ? std::string("gone") : status_badge(link.status)) + "</td>";
    if (with_parent_status)
      html += "<td class=\"parent-status\">" + esc(link.parent_status) + "</td>";
    html += "</tr>\n";
  }
  html += "</tbody></table>\n";
  if (total.at_least || total.value > static_cast<std::int64_t>(links.size())) {
    html += std::string("<p class=\"empty\">The first ") + std::to_string(links.size()) + " of " +
            format_count(total) + ".</p>\n";
  }
  return html;
}

}  // namespace

bool can_retry(const std::string& status) {
  return status == "failed" || status == "dead" || status == "cancelled";
}

bool can_cancel(const std::string& status) {
  return status == "pending" || status == "failed" || status == "running" || status == "blocked";
}

std::string render_overview(const PageContext& context, const Overview& overview) {
  std::string main = "<h1>Overview</h1>\n<section><h2>Queues</h2>";
  if (overview.queues.empty()) {
    main += "<p class=\"empty\">No jobs yet.</p>";
  }
  main +=
      "<table id=\"queues-table\"><thead><tr><th>Queue</th><th>Pending</th><th>Running</th>"
      "<th>Failed</th><th>Done</th><th>Dead</th><th>Cancelled</th><th>Blocked</th>"
      "<th>Paused</th><th>Oldest due</th></tr></thead><tbody>\n";
  for (const QueueOverview& q : overview.queues) {
    const std::string name = esc(q.queue);
    const auto count = [&](const BoundedCount& c, const char* css, const char* status) {
      return std::string("<td class=\"num ") + css +
             "\"><a href=\"/jobs?queue=" + esc(url_encode(q.queue)) + "&amp;status=" + status +
             "\">" + format_count(c) + "</a></td>";
    };
    main += "<tr data-queue=\"" + name;
    main += R"("><th scope="row">)" + name;
    main += "</th>" + count(q.pending, "count-pending", "pending") +
            count(q.running, "count-running", "running") +
            count(q.failed, "count-failed", "failed") + count(q.done, "count-done", "done") +
            count(q.dead, "count-dead", "dead") +
            count(q.cancelled, "count-cancelled", "cancelled") +
            count(q.blocked, "count-blocked", "blocked") + "<td class=\"paused\">" +
            (q.paused ? "paused" : "no") + "</td><td class=\"num oldest-due\">" +
            (q.oldest_due_age_seconds > 0 ? format_age(q.oldest_due_age_seconds) : "–") +
            "</td></tr>\n";
  }
  main += "</tbody></table></section>\n";
  main += "<section><h2>Throughput, last hour (UTC)</h2>" +
          render_throughput_chart(overview.last_hour) +
          "<p class=\"legend\"><span class=\"key-done\">■</span> done "
          "<span class=\"key-failed\">■</span> failed attempts</p></section>\n";
  main +=
      "<section><h2>Daemons</h2><table id=\"daemons-table\"><thead><tr><th>Id</th><th>Host</th>"
      "<th>PID</th><th>Version</th><th>Busy</th><th>Up</th><th>Seen</th></tr></thead><tbody>\n";
  for (const DaemonInfo& d : overview.daemons) {
    main += "<tr data-daemon-id=\"" + esc(d.id) + "\"" + (d.leader ? " class=\"leader\"" : "") +
            ">" + cell(d.id + (d.leader ? " (leader)" : "")) + cell(d.host) +
            cell(std::to_string(d.pid), "num") + cell(d.version) +
            cell(std::to_string(d.busy) + " / " + std::to_string(d.concurrency), "num") +
            cell(format_age(d.started_seconds_ago), "num") +
            cell(format_age(d.seen_seconds_ago) + " ago", "num") + "</tr>\n";
  }
  if (overview.daemons.empty()) {
    main += "<tr><td colspan=\"7\" class=\"empty\">No daemon is running.</td></tr>\n";
  }
  main += "</tbody></table></section>\n";
  return layout(&context, "overview", "Overview", main);
}

std::string render_jobs(const PageContext& context, const JobFilter& filter, const JobPage& page,
                        const std::string& query) {
  std::string main = "<h1>Jobs</h1>\n";
  const auto selected = [&](std::string_view status) {
    return filter.status && *filter.status == status ? " selected" : "";
  };
  main +=
      "<form id=\"jobs-filter\" method=\"get\" action=\"/jobs\"><label>Status <select "
      "name=\"status\"><option value=\"\">any</option>";
  for (const std::string_view status : kJobStatuses) {
    main += std::string("<option") + selected(status) + ">" + std::string(status) + "</option>";
  }
  main += R"(</select></label> <label>Queue <input name="queue" value=")" +
          esc(filter.queue.value_or("")) + R"("></label> <label>Type <input name="type" value=")" +
          esc(filter.type.value_or("")) + R"("></label> <label>Id <input name="id" value=")" +
          (filter.id ? std::to_string(*filter.id) : "") +
          "\" inputmode=\"numeric\" size=\"10\"></label> <button type=\"submit\" "
          "id=\"filter-submit\">Filter</button> <a href=\"/jobs\">clear</a></form>\n";

  const std::string back = "/jobs" + (query.empty() ? "" : "?" + query);
  if (context.can_act) {
    main += R"(<form id="bulk-form" method="post" action="/jobs/bulk">)" + csrf_field(context) +
            back_field(back) +
            "<p class=\"bulk-actions\">Selected: <button type=\"submit\" name=\"action\" "
            "value=\"retry\" id=\"bulk-retry\">Retry</button> <button type=\"submit\" "
            "name=\"action\" value=\"cancel\" id=\"bulk-cancel\">Cancel</button></p>\n";
  }
  main +=
      "<table id=\"jobs-table\"><thead><tr><th></th><th>Id</th><th>Queue</th><th>Type</th>"
      "<th>Status</th><th>Attempts</th><th>Priority</th><th>Run at</th><th>Created</th>"
      "<th>Last error</th></tr></thead><tbody>\n";
  for (const JobSummary& job : page.jobs) {
    const std::string id = std::to_string(job.id);
    main += "<tr data-job-id=\"" + id + "\"><td>";
    if (context.can_act) {
      main += R"(<input type="checkbox" name="id" value=")" + id;
      main += "\" aria-label=\"select job " + id + "\">";
    }
    main += "</td><td class=\"num\">" + job_link(job.id) + "</td>" + "<td>" +
            esc_short(job.queue, kMaxListQueueShown) + "</td><td class=\"type\">" +
            esc_short(job.type, kMaxListTypeShown) + "</td>" + "<td class=\"job-status\">" +
            status_badge(job.status) + "</td>" +
            cell(std::to_string(job.attempts) + " / " + std::to_string(job.max_attempts), "num") +
            cell(std::to_string(job.priority), "num") + cell(job.run_at) + cell(job.created_at) +
            "<td class=\"error\">" + esc_short(job.last_error, kMaxListErrorShown) + "</td>" +
            "</tr>\n";
  }
  if (page.jobs.empty()) {
    main += "<tr><td colspan=\"10\" class=\"empty\">No jobs match.</td></tr>\n";
  }
  main += "</tbody></table>\n";
  if (context.can_act) main += "</form>\n";
  if (page.next_before) {
    std::string next = "/jobs?";
    if (filter.status) next += "status=" + url_encode(*filter.status) + "&";
    if (filter.queue) next += "queue=" + url_encode(*filter.queue) + "&";
    if (filter.type) next += "type=" + url_encode(*filter.type) + "&";
    if (filter.id) next += "id=" + std::to_string(*filter.id) + "&";
    if (filter.limit != 50) next += "limit=" + std::to_string(filter.limit) + "&";
    next += "before=" + std::to_string(*page.next_before);
    main +=
        R"(<p class="pager"><a id="next-page" href=")" + esc(next) + "\">Older jobs →</a></p>\n";
  }
  return layout(&context, "jobs", "Jobs", main);
}

std::string render_job(const PageContext& context, const JobDetail& job, bool show_payloads) {
  const JobSummary& s = job.summary;
  const std::string id = std::to_string(s.id);
  std::string main = "<h1>Job " + id + "</h1>\n<dl class=\"job-fields\">";
  const auto field = [&](const char* name, const std::string& value, const char* dd_id = nullptr) {
    main += std::string("<dt>") + name + "</dt><dd" +
            (dd_id != nullptr ? std::string(" id=\"") + dd_id + "\"" : "") + ">" + esc(value) +
            "</dd>";
  };
  main += R"(<dt>Status</dt><dd><span id="job-status" class="status status-)" + esc(s.status) +
          "\">" + esc(s.status) + "</span>" + (job.cancel_requested ? " (cancel requested)" : "") +
          "</dd>";
  field("Queue", s.queue, "job-queue");
  field("Type", s.type, "job-type");
  field("Priority", std::to_string(s.priority));
  field("Attempts", std::to_string(s.attempts) + " / " + std::to_string(s.max_attempts));
  field("Run at", s.run_at);
  field("Created", s.created_at);
  if (!job.started_at.empty()) field("Started", job.started_at);
  if (!job.updated_at.empty()) field("Updated", job.updated_at);
  if (!s.finished_at.empty()) field("Finished", s.finished_at);
  // A done job keeps locked_by (who ran its last attempt) without a lease.
  if (!job.locked_by.empty() && !job.locked_until.empty()) {
    field("Locked by", job.locked_by + " until " + job.locked_until);
  } else if (!job.locked_by.empty()) {
    field("Last run by", job.locked_by);
  }
  if (!job.unique_key.empty()) field("Unique key", job.unique_key);
  if (!job.cancel_reason.empty()) field("Cancel reason", job.cancel_reason);
  main += "</dl>\n";
  if (!s.last_error.empty()) {
    main += "<h2>Last error</h2><pre id=\"job-error\">" + esc(s.last_error) + "</pre>\n";
  }
  if (context.can_act && (can_retry(s.status) || can_cancel(s.status))) {
    main += "<div class=\"actions\">";
    if (can_retry(s.status)) {
      main += R"(<form id="retry-form" method="post" action="/jobs/)" + id + "/retry\">" +
              csrf_field(context) +
              R"(<button type="submit" id="retry-button">Retry</button></form>)";
    }
    if (can_cancel(s.status)) {
      main += R"(<form id="cancel-form" method="post" action="/jobs/)" + id + "/cancel\">" +
              csrf_field(context) +
              "<input name=\"reason\" placeholder=\"reason (optional)\" maxlength=\"500\"> "
              "<button type=\"submit\" id=\"cancel-button\">Cancel</button></form>";
    }
    main += "</div>\n";
  }
  main += "<h2>Payload</h2>";
  if (show_payloads && job.payload_json) {
    main += "<pre id=\"job-payload\">" +
            json_shown(*job.payload_json, job.payload_cut, kMaxPayloadShown) + "</pre>\n";
  } else {
    main += "<p id=\"payload-hidden\">Payloads are hidden (ui.show_payloads: false).</p>\n";
  }
  // What the handler returned: as private as the payload it was made from.
  if (show_payloads && job.result_json) {
    main += "<h2>Result</h2><pre id=\"job-result\">" +
            json_shown(*job.result_json, job.result_cut, kMaxResultShown) + "</pre>\n";
  }
  main += render_links("Parents", "job-parents", job.parents, job.parents_total, true);
  main += render_links("Children", "job-children", job.children, job.children_total, false);
  main +=
      "<h2>Attempts</h2><table id=\"attempts-table\"><thead><tr><th>#</th><th>Worker</th>"
      "<th>Started</th><th>Finished</th><th>Seconds</th><th>Outcome</th><th>Error</th></tr>"
      "</thead><tbody>\n";
  char seconds[32];
  // The latest attempts are the ones worth reading.
  const std::size_t skipped =
      job.attempts.size() > kMaxAttemptsShown ? job.attempts.size() - kMaxAttemptsShown : 0;
  for (std::size_t i = skipped; i < job.attempts.size(); ++i) {
    const AttemptInfo& a = job.attempts[i];
    std::snprintf(seconds, sizeof seconds, "%.3f", a.seconds);
    // Header rows sit in <thead>: "#attempts-table tbody tr" (or tr[data-attempt]) counts
    // attempts.
    main += "<tr data-attempt=\"" + std::to_string(a.attempt) + "\">" +
            cell(std::to_string(a.attempt), "num") + cell(a.worker) + cell(a.started_at) +
            cell(a.finished_at) + cell(seconds, "num") + cell(a.outcome, "outcome") +
            "<td class=\"error\">" +
            (a.error.empty() ? "" : "<pre>" + esc_short(a.error, kMaxErrorShown) + "</pre>") +
            "</td></tr>\n";
  }
  main += "</tbody></table>\n";
  if (skipped > 0) {
    main += "<p class=\"empty\">The last " + std::to_string(kMaxAttemptsShown) + " of " +
            format_thousands(static_cast<std::int64_t>(job.attempts.size())) + " attempts.</p>\n";
  }
  return layout(&context, "job", "Job " + id, main);
}

std::string render_queues(const PageContext& context, const std::vector<QueueInfo>& queues,
                          const std::vector<LimitInfo>& limits) {
  std::string main =
      "<h1>Queues</h1>\n<table id=\"queues-list\"><thead><tr><th>Queue</th><th>State</th>"
      "<th>Changed</th><th></th></tr></thead><tbody>\n";
  for (const QueueInfo& q : queues) {
    const std::string name = esc(q.queue);
    const std::string path = esc(url_encode(q.queue));
    main += "<tr data-queue=\"" + name;
    main += R"("><th scope="row"><a href="/jobs?queue=)" + path;
    main += "\">" + name;
    main += std::string("</a></th><td class=\"paused\">") + (q.paused ? "paused" : "running") +
            "</td>" + cell(q.updated_at) + "<td>";
    if (context.can_act) {
      const char* verb = q.paused ? "resume" : "pause";
      main += std::string("<form class=\"") + verb + R"(-form" method="post" action="/queues/)" +
              path + "/" + verb + "\">" + csrf_field(context) + R"(<button type="submit" class=")" +
              verb + "-button\">" + (q.paused ? "Resume" : "Pause") + "</button></form>";
    }
    main += "</td></tr>\n";
  }
  if (queues.empty()) main += "<tr><td colspan=\"4\" class=\"empty\">No queues yet.</td></tr>\n";
  main += "</tbody></table>\n";
  if (!limits.empty()) {
    main +=
        "<h2>Limits</h2><table id=\"limits-table\"><thead><tr><th>Name</th><th>Definition</th>"
        "<th>Running</th><th>Partitions</th></tr></thead><tbody>\n";
    for (const LimitInfo& l : limits) {
      main += "<tr data-limit=\"" + esc(l.name) + "\">" + cell(l.name) + cell(l.definition) +
              "<td class=\"num\">" + format_thousands(l.running) + "</td><td class=\"num\">" +
              format_thousands(l.partitions) + "</td></tr>\n";
    }
    main += "</tbody></table>\n";
  }
  return layout(&context, "queues", "Queues", main);
}

std::string render_schedules(const PageContext& context,
                             const std::vector<ScheduleInfo>& schedules) {
  std::string main =
      "<h1>Schedules</h1>\n<table id=\"schedules-table\"><thead><tr><th>Name</th><th>Timing</th>"
      "<th>Type</th><th>Queue</th><th>State</th><th>Last tick</th><th>Next tick</th><th></th>"
      "</tr></thead><tbody>\n";
  for (const ScheduleInfo& s : schedules) {
    const std::string state = !s.enabled ? "disabled" : s.paused ? "paused" : "active";
    main += "<tr data-schedule=\"" + esc(s.name) + "\">" + cell(s.name) + cell(s.timing) +
            cell(s.type) + cell(s.queue) + cell(state, "state") + cell(s.last_tick) +
            cell(s.next_tick) + "<td>";
    if (context.can_act) {
      const char* verb = s.paused ? "resume" : "pause";
      main += std::string("<form class=\"") + verb + R"(-form" method="post" action="/schedules/)" +
              esc(url_encode(s.name)) + "/" + verb + "\">" + csrf_field(context) +
              R"(<button type="submit" class=")" + verb + "-button\">" +
              (s.paused ? "Resume" : "Pause") + "</button></form>";
    }
    main += "</td></tr>\n";
  }
  if (schedules.empty()) {
    main += "<tr><td colspan=\"8\" class=\"empty\">No schedules.</td></tr>\n";
  }
  main += "</tbody></table>\n";
  return layout(&context, "schedules", "Schedules", main);
}

std::string render_audit(const PageContext& context, const std::vector<AuditEntry>& entries) {
  std::string main =
      "<h1>Audit</h1>\n<table id=\"audit-table\"><thead><tr><th>At</th><th>User</th>"
      "<th>From</th><th>Action</th><th>Target</th><th>Jobs</th><th>Detail</th></tr></thead>"
      "<tbody>\n";
  for (const AuditEntry& e : entries) {
    std::string jobs;
    for (std::size_t i = 0; i < e.job_ids.size() && i < 20; ++i) {
      jobs += (i > 0 ? " " : "") + job_link(e.job_ids[i]);
    }
    if (e.job_ids.size() > 20)
      jobs += " … (" + format_thousands(std::int64_t(e.job_ids.size())) + ")";
    main += "<tr data-audit-id=\"" + std::to_string(e.id) + "\">" + cell(e.at) +
            cell(e.user, "audit-user") + cell(e.remote_address) + cell(e.action, "audit-action") +
            cell(e.target, "audit-target") + "<td>" + jobs + "</td>" + "<td>" +
            esc_short(e.detail, kMaxDetailShown) + "</td>" + "</tr>\n";
  }
  if (entries.empty()) main += "<tr><td colspan=\"7\" class=\"empty\">Nothing yet.</td></tr>\n";
  main += "</tbody></table>\n";
  return layout(&context, "audit", "Audit", main);
}

std::string render_login(bool error, const std::string& user) {
  std::string main = "<h1>pgjobd</h1>\n";
  if (error) main += "<p id=\"login-error\" role=\"alert\">Wrong user name or password.</p>\n";
  main +=
      "<form id=\"login-form\" method=\"post\" action=\"/login\"><p><label>User <input "
      "name=\"user\" autocomplete=\"username\" required autofocus value=\"" +
      esc(user) +
      "\"></label></p><p><label>Password <input name=\"password\" type=\"password\" "
      "autocomplete=\"current-password\" required></label></p><p><button type=\"submit\" "
      "id=\"login-submit\">Log in</button></p></form>\n";
  return layout(nullptr, "login", "Log in", main);
}

std::string render_error(const PageContext* context, int status, const std::string& message) {
  std::string title;
  switch (status) {
    case 400:
      title = "Bad request";
      break;
    case 403:
      title = "Forbidden";
      break;
    case 404:
      title = "Not found";
      break;
    case 503:
      title = "Database unavailable";
      break;
    default:
      title = "Error";
  }
  std::string main = "<h1>" + title + "</h1>\n<p id=\"error-message\" data-status=\"" +
                     std::to_string(status) + "\">" + esc(message) + "</p>\n";
  PageContext quiet;
  if (context != nullptr) {
    quiet = *context;
    quiet.flash.clear();
  }
  return layout(context != nullptr ? &quiet : nullptr, "error", title, main);
}

}  // namespace pgjobd::ui
