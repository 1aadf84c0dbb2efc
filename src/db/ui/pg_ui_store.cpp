// PgUiStore: the dashboard's reads (cached overview, keyset job pages, one job) and its
// actions, each with its audit row.

#include "db/ui/pg_ui_store.hpp"

#include <algorithm>
#include <limits>
#include <pqxx/pqxx>

#include "db/admin/limit_stats.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `text` (the statement's kJsonTextSent + 1 characters at most) held more than
// kJsonTextSent characters; if so, drops the extra one.
bool cut_json(std::string& text) {
  std::size_t characters = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (++characters > ui::kJsonTextSent) {
      text.resize(i);
      return true;
    }
  }
  return false;
}

std::string text_of(const pqxx::field& field) { return field.is_null() ? "" : field.c_str(); }

ui::BoundedCount bounded(std::int64_t counted, std::int64_t bound) {
  return counted > bound ? ui::BoundedCount{bound, true} : ui::BoundedCount{counted, false};
}

// The summary's columns (ui_statements.cpp's {summary}) from column `at` on.
ui::JobSummary summary_of(const pqxx::row& row, int at = 0) {
  ui::JobSummary s;
  s.id = row[at].as<std::int64_t>();
  s.queue = text_of(row[at + 1]);
  s.type = text_of(row[at + 2]);
  s.status = text_of(row[at + 3]);
  s.priority = row[at + 4].as<int>();
  s.attempts = row[at + 5].as<int>();
  s.max_attempts = row[at + 6].as<int>();
  s.run_at = text_of(row[at + 7]);
  s.created_at = text_of(row[at + 8]);
  s.finished_at = text_of(row[at + 9]);
  s.last_error = text_of(row[at + 10]);
  return s;
}
constexpr int kSummaryColumns = 11;
// A job page lists this many of the job's parents and of its children (README "Dashboard"):
// two full lists (~17 KB each, types cut at 100 bytes) beside the largest payload, result
// and attempts still keep the page under 150 KB.
constexpr int kLinksShown = 50;

// Pausing or resuming one queue or schedule: counted and said the same way for both.
ui::ActionResult pause_result(const std::string& what, bool pause, bool was_paused) {
  ui::ActionResult r;
  ++(was_paused != pause ? r.changed : r.unchanged);
  r.message = what + (pause ? " paused" : " resumed");
  if (r.unchanged > 0) r.message += pause ? " (it already was)" : " (it was not paused)";
  return r;
}

// One row of the audit trail ($1 user .. $6 detail, ui_statements.hpp), in the action's
// transaction.
void write_audit(pqxx::transaction_base& txn, const std::string& audit_insert,
                 const ui::Actor& actor, const char* action, const std::string& target,
                 const std::string& ids, const std::string& detail) {
  txn.exec_params(audit_insert, sanitize_text(actor.user), sanitize_text(actor.remote_address),
                  action, target, ids, detail);
}

// "every 5m", "every 90s": the schedule's interval as its YAML would say it.
std::string every_text(std::int64_t seconds) {
  if (seconds % 3600 == 0) return "every " + std::to_string(seconds / 3600) + "h";
  if (seconds % 60 == 0) return "every " + std::to_string(seconds / 60) + "m";
  return "every " + std::to_string(seconds) + "s";
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

PgUiStore::PgUiStore(DatabaseConfig config, UiStoreOptions options)
    : options_(options),
      sql_(stmt::ui_statements(quote_identifier(config.schema))),
      session_(std::move(config), "ui") {
  session_.back_off_reconnects();
}

PgUiStore::~PgUiStore() = default;

std::uint64_t PgUiStore::statements_sent() const {
  std::lock_guard lock(mutex_);
  return sent_;
}

// No call deadline of the session's: statement_timeout bounds each statement.
template <typename Txn, typename Fn>
auto PgUiStore::run(const char* operation, Fn&& fn) {
  std::lock_guard lock(mutex_);
  return session_.connect_and_call(operation, Millis(0), [&] {
    Txn txn(session_.connection());
    // SET LOCAL: ends with the transaction, so nothing stays on a session that a pooler
    // hands to another client.
    txn.exec_params(sql_.set_local, "statement_timeout",
                    std::to_string(options_.statement_timeout.count()) + "ms");
    txn.exec_params(sql_.set_local, "jit", "off");
    sent_ += 2;
    auto result = fn(txn);
    txn.commit();
    return result;
  });
}

template <typename Fn>
auto PgUiStore::read(const char* operation, Fn&& fn) {
  return run<pqxx::read_transaction>(operation, std::forward<Fn>(fn));
}

template <typename Fn>
auto PgUiStore::write(const char* operation, Fn&& fn) {
  return run<pqxx::work>(operation, std::forward<Fn>(fn));
}

void PgUiStore::ping() {
  read("dashboard ping", [&](pqxx::transaction_base& txn) {
    ++sent_;
    return txn.exec(sql_.ping).size();
  });
}

ui::Overview PgUiStore::overview() {
  {
    std::lock_guard lock(mutex_);
    if (cached_ && Clock::now() - cached_at_ < options_.cache_ttl) return *cached_;
  }
  ui::Overview overview = read("dashboard overview", [&](pqxx::transaction_base& txn) {
    // Another thread may have refreshed the cache while this one waited for the mutex:
    // browsers whose refreshes coincide cost one query, not one each.
    if (cached_ && Clock::now() - cached_at_ < options_.cache_ttl) return *cached_;
    ui::Overview out;
    for (const auto& row : txn.exec_params(sql_.overview_counts, options_.count_bound + 1)) {
      ui::QueueOverview q;
      q.queue = text_of(row[0]);
      q.paused = row[1].as<bool>();
      q.pending = bounded(row[2].as<std::int64_t>(), options_.count_bound);
      q.running = bounded(row[3].as<std::int64_t>(), options_.count_bound);
      q.failed = bounded(row[4].as<std::int64_t>(), options_.count_bound);
      q.dead = bounded(row[5].as<std::int64_t>(), options_.count_bound);
      q.cancelled = bounded(row[6].as<std::int64_t>(), options_.count_bound);
      q.blocked = bounded(row[7].as<std::int64_t>(), options_.count_bound);
      // Done among the newest count_bound + 1 done rows: exact when there are fewer, else
      // "at least" what the window held (at most the bound).
      const auto done = row[8].as<std::int64_t>();
      q.done = row[9].as<bool>() ? ui::BoundedCount{std::min(done, options_.count_bound), true}
                                 : bounded(done, options_.count_bound);
      q.oldest_due_age_seconds = row[10].as<double>();
      out.queues.push_back(std::move(q));
    }
    out.last_hour = last_hour(txn);
    for (const auto& row : txn.exec_params(sql_.daemons)) {
      ui::DaemonInfo d;
      d.id = text_of(row[0]);
      d.host = text_of(row[1]);
      d.pid = row[2].as<std::int64_t>();
      d.version = text_of(row[3]);
      d.concurrency = row[4].as<int>();
      d.busy = row[5].as<int>();
      d.leader = row[6].as<bool>();
      d.started_seconds_ago = row[7].as<double>();
      d.seen_seconds_ago = row[8].as<double>();
      out.daemons.push_back(std::move(d));
    }
    sent_ += 3;
    return out;
  });
  std::lock_guard lock(mutex_);
  cached_ = overview;
  cached_at_ = Clock::now();
  return overview;
}

// Called by overview() with the mutex held.
std::vector<ui::MinuteBucket> PgUiStore::last_hour(pqxx::transaction_base& txn) {
  // Only the minutes not kept yet: the newest kept one is read again (a job committed just
  // after its minute ended may still land in it).
  const std::int64_t from = final_minutes_.empty() ? 0 : final_minutes_.rbegin()->first;
  std::vector<ui::MinuteBucket> fresh;
  std::int64_t current = 0;
  for (const auto& row : txn.exec_params(sql_.throughput, from)) {
    if (row[0].as<std::int64_t>() == -1) {
      current = row[1].as<std::int64_t>();
      continue;
    }
    fresh.push_back(
        {row[0].as<std::int64_t>(), row[1].as<std::int64_t>(), row[2].as<std::int64_t>()});
  }
  constexpr std::int64_t kMinute = 60;
  const std::int64_t first = current - 59 * kMinute;
  std::erase_if(final_minutes_, [&](const auto& entry) { return entry.first < first; });
  std::map<std::int64_t, ui::MinuteBucket> minutes = final_minutes_;
  for (const auto& bucket : fresh) {
    minutes[bucket.minute_epoch] = bucket;
    // Over for a whole minute: no commit lands in it any more.
    if (bucket.minute_epoch < current - kMinute) final_minutes_[bucket.minute_epoch] = bucket;
  }
  std::vector<ui::MinuteBucket> out;
  for (std::int64_t m = first; m <= current; m += kMinute) {
    const auto it = minutes.find(m);
    out.push_back(it == minutes.end() ? ui::MinuteBucket{m, 0, 0} : it->second);
  }
  return out;
}

ui::JobPage PgUiStore::jobs(const ui::JobFilter& filter) {
  const int limit = std::clamp(filter.limit, 1, 200);
  return read("dashboard jobs", [&](pqxx::transaction_base& txn) {
    ui::JobPage page;
    ++sent_;
    if (filter.id) {
      // One job by id, if it matches the other filters too.
      for (const auto& row :
           txn.exec_params(sql_.job_row, *filter.id, filter.status, filter.queue, filter.type)) {
        page.jobs.push_back(summary_of(row));
      }
      return page;
    }
    const std::int64_t before = filter.before_id.value_or(std::numeric_limits<std::int64_t>::max());
    // Without a filter every scanned job matches: a page's worth is enough.
    const bool filtered = filter.queue || filter.type || filter.status == "done";
    const std::int64_t scan =
        filtered ? std::max<std::int64_t>(options_.page_scan, limit + 1) : limit + 1;
    std::int64_t low = 0;  // the lowest id looked at when the scan was full
    for (const auto& row : txn.exec_params(sql_.jobs, filter.status, filter.queue, filter.type,
                                           before, limit + 1, scan)) {
      low = row[0].as<std::int64_t>();
      if (!row[1].is_null()) page.jobs.push_back(summary_of(row, 1));
    }
    if (static_cast<int>(page.jobs.size()) > limit) {
      page.jobs.pop_back();
      page.next_before = page.jobs.back().id;
    } else if (low > 0) {
      page.next_before = low;  // jobs below it were not looked at
    }
    return page;
  });
}

std::optional<ui::JobDetail> PgUiStore::job(std::int64_t id, bool with_payload) {
  return read("dashboard job", [&](pqxx::transaction_base& txn) -> std::optional<ui::JobDetail> {
    ++sent_;
    const pqxx::result rows =
        txn.exec_params(sql_.job, id, with_payload, static_cast<std::int64_t>(ui::kJsonTextSent));
    if (rows.empty()) return std::nullopt;
    const pqxx::row row = rows[0];
    ui::JobDetail d;
    d.summary = summary_of(row);
    int c = kSummaryColumns;
    if (!row[c].is_null()) d.payload_cut = cut_json(d.payload_json.emplace(row[c].c_str()));
    d.locked_by = text_of(row[++c]);
    d.locked_until = text_of(row[++c]);
    d.started_at = text_of(row[++c]);
    d.updated_at = text_of(row[++c]);
    d.unique_key = text_of(row[++c]);
    d.cancel_requested = row[++c].as<bool>();
    d.cancel_reason = text_of(row[++c]);
    if (!row[++c].is_null()) d.result_cut = cut_json(d.result_json.emplace(row[c].c_str()));
    const auto links = [&](const std::string& sql, std::vector<ui::JobLink>& out,
                           ui::BoundedCount& total) {
      ++sent_;
      for (const auto& l : txn.exec_params(sql, id, kLinksShown, options_.count_bound + 1)) {
        out.push_back({l[0].as<std::int64_t>(), text_of(l[1]), text_of(l[2]), text_of(l[3])});
        total = bounded(l[4].as<std::int64_t>(), options_.count_bound);
      }
    };
    links(sql_.job_parents, d.parents, d.parents_total);
    links(sql_.job_children, d.children, d.children_total);
    ++sent_;
    for (const auto& a : txn.exec_params(sql_.job_attempts, id)) {
      ui::AttemptInfo info;
      info.attempt = a[0].is_null() ? 0 : a[0].as<int>();
      info.worker = text_of(a[1]);
      info.started_at = text_of(a[2]);
      info.finished_at = text_of(a[3]);
      info.seconds = a[4].as<double>();
      info.outcome = text_of(a[5]);
      info.error = text_of(a[6]);
      d.attempts.push_back(std::move(info));
    }
    return d;
  });
}

std::vector<ui::QueueInfo> PgUiStore::queues() {
  return read("dashboard queues", [&](pqxx::transaction_base& txn) {
    std::vector<ui::QueueInfo> out;
    ++sent_;
    for (const auto& row : txn.exec_params(sql_.queues, options_.count_bound + 1)) {
      out.push_back({text_of(row[0]), row[1].as<bool>(), text_of(row[2])});
    }
    return out;
  });
}

// The limits (README "Limits") with their use, as `pgjobd stats` shows them.
std::vector<ui::LimitInfo> PgUiStore::limits() {
  return read("dashboard limits", [&](pqxx::transaction_base& txn) {
    sent_ += 2;
    std::vector<ui::LimitInfo> out;
    for (LimitStatsRow& row : read_limit_stats(txn, session_.config().schema)) {
      out.push_back({std::move(row.name), std::move(row.definition), row.running, row.partitions});
    }
    return out;
  });
}

std::vector<ui::ScheduleInfo> PgUiStore::schedules() {
  return read("dashboard schedules", [&](pqxx::transaction_base& txn) {
    std::vector<ui::ScheduleInfo> out;
    ++sent_;
    for (const auto& row : txn.exec_params(sql_.schedules)) {
      ui::ScheduleInfo s;
      s.name = text_of(row[0]);
      const std::string cron = text_of(row[1]);
      s.timing = (cron.empty() ? every_text(row[2].as<std::int64_t>()) : cron) + " (" +
                 text_of(row[3]) + ")";
      s.type = text_of(row[4]);
      s.queue = text_of(row[5]);
      s.enabled = row[6].as<bool>();
      s.paused = row[7].as<bool>();
      s.last_tick = text_of(row[8]);
      s.next_tick = text_of(row[9]);
      out.push_back(std::move(s));
    }
    return out;
  });
}

std::vector<ui::AuditEntry> PgUiStore::audit(int limit) {
  return read("dashboard audit", [&](pqxx::transaction_base& txn) {
    std::vector<ui::AuditEntry> out;
    ++sent_;
    for (const auto& row : txn.exec_params(sql_.audit, std::clamp(limit, 1, 1000))) {
      ui::AuditEntry e;
      e.id = row[0].as<std::int64_t>();
      e.at = text_of(row[1]);
      e.user = text_of(row[2]);
      e.remote_address = text_of(row[3]);
      e.action = text_of(row[4]);
      e.target = text_of(row[5]);
      const std::string ids = text_of(row[6]);
      for (std::size_t pos = 0; pos < ids.size();) {
        const std::size_t end = std::min(ids.find(',', pos), ids.size());
        e.job_ids.push_back(std::stoll(ids.substr(pos, end - pos)));
        pos = end + 1;
      }
      e.detail = text_of(row[7]);
      out.push_back(std::move(e));
    }
    return out;
  });
}

ui::ActionResult PgUiStore::retry(const std::vector<std::int64_t>& ids, const ui::Actor& actor) {
  ui::ActionResult result = write("dashboard retry", [&](pqxx::transaction_base& txn) {
    ui::ActionResult r;
    sent_ += 2;
    for (const auto& row : txn.exec_params(sql_.retry_many, int_array_literal(ids))) {
      ++(row[2].as<bool>() ? r.changed : r.unchanged);
    }
    r.message = "Retried " + plural(r.changed, "job", "jobs");
    if (r.unchanged > 0) {
      r.message += "; " + std::to_string(r.unchanged) +
                   " left as they were (not failed, dead or cancelled, gone, or a live job "
                   "holds their unique key)";
    }
    write_audit(txn, sql_.audit_insert, actor, "retry",
                ids.size() == 1 ? std::to_string(ids[0]) : "", int_array_literal(ids), r.message);
    return r;
  });
  std::lock_guard lock(mutex_);
  cached_.reset();
  return result;
}

ui::ActionResult PgUiStore::cancel(const std::vector<std::int64_t>& ids, const std::string& reason,
                                   const ui::Actor& actor) {
  ui::ActionResult result = write("dashboard cancel", [&](pqxx::transaction_base& txn) {
    ui::ActionResult r;
    const std::string id_array = int_array_literal(ids);
    // pgjobd_cancel_many answers 'cancelled' for a job that already was: the statuses
    // before tell a change from a no-op.
    std::map<std::int64_t, std::string> before;
    for (const auto& row : txn.exec_params(sql_.job_statuses, id_array)) {
      before[row[0].as<std::int64_t>()] = text_of(row[1]);
    }
    int stopping = 0;
    const std::optional<std::string> why =
        reason.empty() ? std::nullopt : std::optional<std::string>(sanitize_text(reason));
    for (const auto& row : txn.exec_params(sql_.cancel_many, id_array, why)) {
      const auto it = before.find(row[0].as<std::int64_t>());
      const bool live = it != before.end() && (it->second == "pending" || it->second == "failed" ||
                                               it->second == "running");
      if (live) {
        ++r.changed;
        if (text_of(row[1]) == "running") ++stopping;
      } else {
        ++r.unchanged;
      }
    }
    sent_ += 3;
    r.message = "Cancelled " + plural(r.changed, "job", "jobs");
    if (stopping > 0) r.message += " (" + std::to_string(stopping) + " running: stopping)";
    if (r.unchanged > 0) {
      r.message += "; " + std::to_string(r.unchanged) + " already finished or gone";
    }
    write_audit(txn, sql_.audit_insert, actor, "cancel",
                ids.size() == 1 ? std::to_string(ids[0]) : "", id_array,
                reason.empty() ? r.message : r.message + "; reason: " + sanitize_text(reason));
    return r;
  });
  std::lock_guard lock(mutex_);
  cached_.reset();
  return result;
}

ui::ActionResult PgUiStore::queue_action(const std::string& queue, bool pause,
                                         const ui::Actor& actor) {
  const char* action = pause ? "pause_queue" : "resume_queue";
  ui::ActionResult result = write(action, [&](pqxx::transaction_base& txn) {
    const pqxx::result was = txn.exec_params(sql_.queue_paused, queue);
    const bool paused = !was.empty() && was[0][0].as<bool>();
    txn.exec_params(pause ? sql_.pause_queue : sql_.resume_queue, queue);
    ui::ActionResult r = pause_result("Queue " + queue, pause, paused);
    write_audit(txn, sql_.audit_insert, actor, action, queue, "{}", r.message);
    sent_ += 3;
    return r;
  });
  std::lock_guard lock(mutex_);
  cached_.reset();
  return result;
}

ui::ActionResult PgUiStore::pause_queue(const std::string& queue, const ui::Actor& actor) {
  return queue_action(queue, true, actor);
}

ui::ActionResult PgUiStore::resume_queue(const std::string& queue, const ui::Actor& actor) {
  return queue_action(queue, false, actor);
}

ui::ActionResult PgUiStore::schedule_action(const std::string& name, bool pause,
                                            const ui::Actor& actor) {
  const char* action = pause ? "pause_schedule" : "resume_schedule";
  return write(action, [&](pqxx::transaction_base& txn) {
    ui::ActionResult r;
    const pqxx::result was = txn.exec_params(sql_.schedule_paused, name);
    ++sent_;
    if (was.empty()) {
      // The functions raise no_data_found for it; answered here instead, as a sentence for
      // the page, with no audit row (nothing was done).
      r.unchanged = 1;
      r.message = "No schedule " + name;
      return r;
    }
    txn.exec_params(pause ? sql_.pause_schedule : sql_.resume_schedule, name);
    r = pause_result("Schedule " + name, pause, was[0][0].as<bool>());
    write_audit(txn, sql_.audit_insert, actor, action, name, "{}", r.message);
    sent_ += 2;
    return r;
  });
}

ui::ActionResult PgUiStore::pause_schedule(const std::string& name, const ui::Actor& actor) {
  return schedule_action(name, true, actor);
}

ui::ActionResult PgUiStore::resume_schedule(const std::string& name, const ui::Actor& actor) {
  return schedule_action(name, false, actor);
}

}  // namespace pgjobd
