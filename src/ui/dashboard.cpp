// Request handling for the dashboard: authentication first, then the cross-site checks of a
// POST, then the store. Every check that can refuse a request runs before the store is
// touched, so a refused request changes nothing.
#include "ui/dashboard.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <exception>
#include <string_view>

#include "log/secrets.hpp"
#include "store/db_error.hpp"
#include "text/utf8.hpp"
#include "ui/assets.hpp"
#include "ui/csrf.hpp"
#include "ui/html.hpp"
#include "ui/pages.hpp"

namespace pgjobd::ui {
namespace {

constexpr std::string_view kAnonymous = "anonymous";
// The jobs table's limits on queue and type (config_rules.cpp explains them); a filter
// longer than any stored value is a mistake worth a 400, not a query.
constexpr std::size_t kMaxFilterBytes = 800;
constexpr std::size_t kMaxBulkIds = 1000;
constexpr std::size_t kMaxReasonBytes = 500;
constexpr int kAuditEntries = 100;

using Form = std::map<std::string, std::vector<std::string>>;

std::string first(const Form& form, const std::string& name) {
  auto found = form.find(name);
  return found == form.end() || found->second.empty() ? std::string() : found->second.front();
}

// A job id as the URL or a form writes it: digits only, positive, fits in bigint.
std::optional<std::int64_t> parse_id(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

Response redirect(const std::string& location) {
  Response response;
  response.status = 303;
  response.headers.emplace_back("Location", location);
  response.body = "<!DOCTYPE html><p>See <a href=\"" + html_escape(location) + "\">" +
                  html_escape(location) + "</a></p>\n";
  return response;
}

std::string session_cookie(int port, const std::string& id, std::chrono::milliseconds ttl) {
  // No Secure flag, hence no __Host- prefix (it requires Secure): the dashboard itself
  // speaks plain HTTP (a TLS proxy may front it).
  return session_cookie_name(port) + "=" + id + "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(ttl).count());
}

std::string expired_cookie(int port) {
  return session_cookie_name(port) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0";
}

// Text fit for a query: valid UTF-8 without control characters (PostgreSQL refuses
// invalid UTF-8 and NUL, and no queue, type or reason holds a control character).
bool is_plain_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Character character = read_utf8_character(text, i);
    if (character.length == 0 || character.code < 0x20 || character.code == 0x7f) return false;
    i += character.length;
  }
  return true;
}

// The message of a 400 for the first parameter of a query string or form that is not plain
// text, naming it; "" when all are.
std::string text_problem(const Form& form) {
  for (const auto& [name, values] : form) {
    if (!is_plain_text(name)) {
      return "a parameter name is not valid UTF-8 text: '" + truncate_utf8(valid_utf8(name), 100) +
             "'";
    }
    for (const std::string& value : values) {
      if (!is_plain_text(value)) {
        return name + ": not valid UTF-8 text (or holds a control character)";
      }
    }
  }
  return "";
}

// A return address from a form: a path of this dashboard, never another site ("//evil",
// "/\evil" and absolute URLs are refused, so the redirect cannot be turned into an open one).
bool is_local_path(std::string_view path) {
  if (path.empty() || path.front() != '/' || path.size() > 4096) return false;
  if (path.size() > 1 && (path[1] == '/' || path[1] == '\\')) return false;
  return std::none_of(path.begin(), path.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == '\\' || c == 0x7f;
  });
}

// Path "/PREFIX/NAME/VERB" → NAME (which may itself contain '/', the path being decoded).
std::optional<std::string> name_between(std::string_view path, std::string_view prefix,
                                        std::string_view verb) {
  if (!path.starts_with(prefix) || !path.ends_with(verb)) return std::nullopt;
  if (path.size() <= prefix.size() + verb.size()) return std::nullopt;
  return std::string(path.substr(prefix.size(), path.size() - prefix.size() - verb.size()));
}

// The jobs list's filters from its query string, or the message of a 400 naming the field.
struct ParsedFilter {
  JobFilter filter;
  std::string error;
};

ParsedFilter parse_filter(const std::string& query) {
  ParsedFilter out;
  const Form form = parse_form(query);
  const auto text_field = [&](const char* name, std::optional<std::string>& into) {
    const std::string value = first(form, name);
    if (value.empty()) return;
    if (value.size() > kMaxFilterBytes) {
      out.error = std::string(name) + ": longer than " + std::to_string(kMaxFilterBytes) + " bytes";
      return;
    }
    into = value;
  };
  const std::string status = first(form, "status");
  if (!status.empty()) {
    if (std::find(kJobStatuses.begin(), kJobStatuses.end(), status) == kJobStatuses.end()) {
      out.error = "status: unknown status '" + status +
                  "' (use pending, running, failed, done, dead, cancelled or blocked)";
      return out;
    }
    out.filter.status = status;
  }
  text_field("queue", out.filter.queue);
  text_field("type", out.filter.type);
  if (!out.error.empty()) return out;
  for (const auto& [name, into] :
       {std::pair<const char*, std::optional<std::int64_t>*>{"id", &out.filter.id},
        {"before", &out.filter.before_id}}) {
    const std::string value = first(form, name);
    if (value.empty()) continue;
    *into = parse_id(value);
    if (!*into) {
      out.error = std::string(name) + ": not a job id: '" + value + "'";
      return out;
    }
  }
  const std::string limit = first(form, "limit");
  if (!limit.empty()) {
    const std::optional<std::int64_t> value = parse_id(limit);
    if (!value || *value > 200) {
      out.error = "limit: must be a number from 1 to 200, got '" + limit + "'";
      return out;
    }
    out.filter.limit = static_cast<int>(*value);
  }
  return out;
}

std::string action_flash(const std::string& what, const ActionResult& result) {
  if (!result.message.empty()) return result.message;
  std::string text = what + ": " + format_thousands(result.changed) + " changed";
  if (result.unchanged > 0) text += ", " + format_thousands(result.unchanged) + " unchanged";
  return text;
}

}  // namespace

std::string session_cookie_name(int port) { return "pgjobd_session_" + std::to_string(port); }

struct Dashboard::Caller {
  Session session;
  bool can_act = false;
  bool new_session = false;  // made for this request: its cookie goes with the response
};

Dashboard::Dashboard(const UiConfig& config, std::unique_ptr<UiStore> store)
    : config_(std::make_shared<const UiConfig>(config)), store_(std::move(store)) {
  const std::string_view listen = config.listen;
  const std::string_view host = listen.substr(0, listen.rfind(':'));
  loopback_only_ = host == "localhost" || host == "[::1]" || host.starts_with("127.");
}

std::shared_ptr<const UiConfig> Dashboard::config() {
  std::lock_guard lock(config_mutex_);
  return config_;
}

void Dashboard::apply(const UiConfig& config) {
  auto next = std::make_shared<UiConfig>(config);
  std::lock_guard lock(config_mutex_);
  // The address and the store's timeout were fixed at start.
  next->listen = config_->listen;
  next->statement_timeout = config_->statement_timeout;
  const std::shared_ptr<const UiConfig> applied = next;
  config_ = std::move(next);
  // A changed or removed password hash ends the sessions opened with the old one (handle()
  // refuses them too; this frees them now).
  sessions_.erase_stale([&](const std::string& user) {
    if (applied->users.empty()) return std::string();
    auto found = applied->users.find(user);
    return found == applied->users.end() ? std::string("(gone)") : found->second.password_hash;
  });
}

bool Dashboard::schedules_exist() {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(schedules_mutex_);
    if (now - schedules_checked_ < std::chrono::seconds(30) &&
        schedules_checked_ != std::chrono::steady_clock::time_point{}) {
      return schedules_exist_;
    }
  }
  bool exist = false;
  try {
    std::lock_guard lock(store_mutex_);
    exist = !store_->schedules().empty();
  } catch (const std::exception&) {
    return false;  // the page itself will say whether the database is there
  }
  std::lock_guard lock(schedules_mutex_);
  schedules_checked_ = now;
  schedules_exist_ = exist;
  return exist;
}

Response Dashboard::error_page(const Caller* caller, const UiConfig& config, int status,
                               const std::string& message) {
  Response response;
  response.status = status;
  if (caller == nullptr) {
    response.body = render_error(nullptr, status, message);
    return response;
  }
  PageContext context;
  context.user = caller->session.user;
  context.can_act = caller->can_act;
  context.can_logout = !config.users.empty();
  context.csrf = caller->session.csrf;
  context.refresh_seconds = static_cast<int>(config.refresh.count() / 1000);
  response.body = render_error(&context, status, message);
  return response;
}

Response Dashboard::handle(const Request& request) {
  const bool is_get = request.method == "GET" || request.method == "HEAD";
  if (!is_get && request.method != "POST") {
    Response response;
    response.status = 405;
    response.headers.emplace_back("Allow", "GET, HEAD, POST");
    response.body = render_error(nullptr, 405, "method not allowed");
    return response;
  }
  const std::shared_ptr<const UiConfig> config_now = config();
  const UiConfig& config = *config_now;
  if (request.host.empty()) return error_page(nullptr, config, 400, "missing Host header");
  if (loopback_only_ && !is_loopback_host_header(request.host)) {
    return error_page(nullptr, config, 403,
                      "this dashboard answers only to a loopback host name such as 127.0.0.1");
  }
  if (is_get) {
    if (request.path == "/favicon.ico") {
      // Browsers ask for it on every page; there is none, and a 404 page would cost a
      // session lookup and a log of nothing.
      Response response;
      response.status = 204;
      response.content_type = "image/x-icon";
      return response;
    }
    if (const Asset* asset = find_asset(request.path)) {
      Response response;
      response.content_type = std::string(asset->content_type);
      response.body = std::string(asset->body);
      response.headers.emplace_back("Cache-Control", "max-age=300");
      return response;
    }
  }
  if (request.path == "/login") {
    if (!is_get) return login(request, config);
    if (config.users.empty()) return redirect("/");
    if (auto session = sessions_.find(request.session_id); session) {
      auto user = config.users.find(session->user);
      if (user != config.users.end() && user->second.password_hash == session->password_hash) {
        return redirect("/");
      }
    }
    Response response;
    response.body = render_login(false, "");
    return response;
  }

  // Who is asking.
  Caller caller;
  std::optional<Session> session =
      request.session_id.empty() ? std::nullopt : sessions_.find(request.session_id);
  if (config.users.empty()) {
    if (session && session->user != kAnonymous) session.reset();
    if (!session && is_get) {
      // No login: a session all the same, for the token its forms carry.
      session = sessions_.create(std::string(kAnonymous), config.session_ttl);
      caller.new_session = true;
    }
    caller.can_act = true;
  } else {
    auto user = session ? config.users.find(session->user) : config.users.end();
    if (user == config.users.end() || user->second.password_hash != session->password_hash) {
      // A session of a user gone, or made with a password since changed, is over.
      if (session) sessions_.erase(session->id);
      session.reset();
    } else {
      caller.can_act = user->second.role == "operator";
    }
  }
  if (!session) {
    if (is_get) return redirect("/login");
    return error_page(nullptr, config, 403, "not logged in");
  }
  caller.session = *session;

  Response response;
  try {
    response = is_get ? route_get(request, caller, config) : route_post(request, caller, config);
  } catch (const DbError& e) {
    spdlog::warn("dashboard: {} {}: database error: {}", request.method, request.path,
                 scrub_process_secrets(e.what()));
    response = error_page(&caller, config, 503,
                          "The database is unavailable (or too slow) just now. This page "
                          "refreshes itself and shows the data once it answers again.");
  } catch (const std::exception& e) {
    spdlog::error("dashboard: {} {}: {}", request.method, request.path,
                  scrub_process_secrets(e.what()));
    response = error_page(&caller, config, 500, "Internal error; the log says more.");
  }
  if (caller.new_session) {
    response.headers.emplace_back(
        "Set-Cookie", session_cookie(request.port, caller.session.id, config.session_ttl));
  }
  return response;
}

std::string Dashboard::database_problem() {
  try {
    std::lock_guard lock(store_mutex_);
    store_->ping();
    return "";
  } catch (const DbError& e) {
    return std::string("database: ") + e.what();
  }
}

Response Dashboard::login(const Request& request, const UiConfig& config) {
  if (!request_from_own_origin(request.origin ? request.origin->c_str() : nullptr,
                               request.referer ? request.referer->c_str() : nullptr,
                               request.host)) {
    return error_page(nullptr, config, 403, "this form must be sent from this dashboard's pages");
  }
  if (config.users.empty()) return redirect("/");
  const Form form = parse_form(request.body);
  const std::string name = first(form, "user");
  const std::string password = first(form, "password");
  const auto too_many = [&](const char* why, const char* retry_after) {
    spdlog::warn("dashboard: login from {} refused: {}", request.remote_address, why);
    Response response;
    response.status = 429;
    response.headers.emplace_back("Retry-After", retry_after);
    response.body = render_login(true, "");
    return response;
  };
  if (!login_throttle_.allowed(request.remote_address, name)) {
    return too_many("too many failed attempts", "300");
  }
  if (!password_gate_.enter()) return too_many("other logins are being checked", "1");
  auto user = config.users.find(name);
  bool ok = false;
  if (user != config.users.end()) {
    ok = verify_password(user->second.password_hash, password);
  } else {
    // As slow as a real check, so the time taken does not tell which names exist.
    static const std::string kDummy = hash_password("pgjobd: no such user");
    verify_password(kDummy, password);
  }
  password_gate_.leave();
  if (!ok) {
    login_throttle_.failed(request.remote_address, name, user != config.users.end());
    spdlog::warn("dashboard: failed login for user '{}' from {}",
                 truncate_utf8(valid_utf8(name), 100), request.remote_address);
    Response response;
    response.status = 401;
    response.body = render_login(true, name);
    return response;
  }
  // A fresh id at login: a session id planted before it is worth nothing after it.
  if (!request.session_id.empty()) sessions_.erase(request.session_id);
  const Session session = sessions_.create(name, config.session_ttl, user->second.password_hash);
  spdlog::info("dashboard: user '{}' logged in from {}", name, request.remote_address);
  Response response = redirect("/");
  response.headers.emplace_back("Set-Cookie",
                                session_cookie(request.port, session.id, config.session_ttl));
  return response;
}

Response Dashboard::route_get(const Request& request, const Caller& caller,
                              const UiConfig& config) {
  PageContext context;
  context.user = caller.session.user;
  context.can_act = caller.can_act;
  context.can_logout = !config.users.empty();
  context.csrf = caller.session.csrf;
  context.refresh_seconds = static_cast<int>(config.refresh.count() / 1000);
  const std::string& path = request.path;
  // Whatever the page, a parameter that is not text is refused before any query is made.
  if (std::string problem = text_problem(parse_form(request.query)); !problem.empty()) {
    return error_page(&caller, config, 400, problem);
  }

  Response response;
  const auto page = [&](auto render) {
    context.schedules_link = schedules_exist();
    context.flash = sessions_.take_flash(caller.session.id);
    std::lock_guard lock(store_mutex_);
    response.body = render();
    return response;
  };
  if (path == "/") {
    return page([&] { return render_overview(context, store_->overview()); });
  }
  if (path == "/jobs") {
    ParsedFilter parsed = parse_filter(request.query);
    if (!parsed.error.empty()) return error_page(&caller, config, 400, parsed.error);
    return page([&] {
      return render_jobs(context, parsed.filter, store_->jobs(parsed.filter), request.query);
    });
  }
  if (path.starts_with("/jobs/")) {
    const std::optional<std::int64_t> id = parse_id(std::string_view(path).substr(6));
    std::optional<JobDetail> job;
    if (id) {
      std::lock_guard lock(store_mutex_);
      job = store_->job(*id, config.show_payloads);
    }
    if (!job) {
      return error_page(
          &caller, config, 404,
          "no job " + std::string(path.substr(6)) + " (it may have been deleted by retention)");
    }
    if (!config.show_payloads) job->payload_json.reset();
    return page([&] { return render_job(context, *job, config.show_payloads); });
  }
  if (path == "/queues") {
    return page([&] { return render_queues(context, store_->queues(), store_->limits()); });
  }
  if (path == "/schedules") {
    return page([&] { return render_schedules(context, store_->schedules()); });
  }
  if (path == "/audit") {
    return page([&] { return render_audit(context, store_->audit(kAuditEntries)); });
  }
  return error_page(&caller, config, 404, "no such page: " + path);
}

Response Dashboard::route_post(const Request& request, const Caller& caller,
                               const UiConfig& config) {
  if (!request_from_own_origin(request.origin ? request.origin->c_str() : nullptr,
                               request.referer ? request.referer->c_str() : nullptr,
                               request.host)) {
    spdlog::warn("dashboard: refused {} from {}: Origin/Referer is not this dashboard",
                 request.path, request.remote_address);
    return error_page(&caller, config, 403, "this form must be sent from this dashboard's pages");
  }
  const Form form = parse_form(request.body);
  if (!constant_time_equals(first(form, "csrf"), caller.session.csrf) ||
      caller.session.csrf.empty()) {
    return error_page(&caller, config, 403,
                      "the form's token is missing or stale: reload the page and try again");
  }
  const std::string& path = request.path;
  // A queue or schedule name in the path and the form's fields reach the database as text.
  if (!is_plain_text(path)) return error_page(&caller, config, 400, "path: not valid UTF-8 text");
  if (std::string problem = text_problem(form); !problem.empty()) {
    return error_page(&caller, config, 400, problem);
  }
  if (path == "/logout") {
    sessions_.erase(caller.session.id);
    Response response = redirect(config.users.empty() ? "/" : "/login");
    response.headers.emplace_back("Set-Cookie", expired_cookie(request.port));
    return response;
  }
  if (!caller.can_act) {
    return error_page(&caller, config, 403, "read-only users cannot change anything");
  }

  const Actor actor{caller.session.user, request.remote_address};
  const std::string back = first(form, "back");
  const auto done = [&](const std::string& flash, const std::string& fallback) {
    sessions_.set_flash(caller.session.id, flash);
    return redirect(is_local_path(back) ? back : fallback);
  };
  std::string reason = first(form, "reason");
  if (reason.size() > kMaxReasonBytes) {
    return error_page(&caller, config, 400,
                      "reason: longer than " + std::to_string(kMaxReasonBytes) + " bytes");
  }
  if (reason.empty()) reason = "cancelled by " + caller.session.user + " in the dashboard";

  if (path == "/jobs/bulk") {
    const std::string action = first(form, "action");
    if (action != "retry" && action != "cancel") {
      return error_page(&caller, config, 400, "action: must be retry or cancel");
    }
    std::vector<std::int64_t> ids;
    auto found = form.find("id");
    if (found != form.end()) {
      for (const std::string& text : found->second) {
        const std::optional<std::int64_t> id = parse_id(text);
        if (!id) return error_page(&caller, config, 400, "id: not a job id: '" + text + "'");
        ids.push_back(*id);
      }
    }
    if (ids.size() > kMaxBulkIds) {
      return error_page(&caller, config, 400,
                        "id: at most " + std::to_string(kMaxBulkIds) + " jobs at once");
    }
    if (ids.empty()) return done("No jobs selected.", "/jobs");
    std::lock_guard lock(store_mutex_);
    const ActionResult result =
        action == "retry" ? store_->retry(ids, actor) : store_->cancel(ids, reason, actor);
    return done(action_flash(action == "retry" ? "Retry" : "Cancel", result), "/jobs");
  }
  for (const char* verb : {"/retry", "/cancel"}) {
    const std::optional<std::string> id_text = name_between(path, "/jobs/", verb);
    if (!id_text) continue;
    const std::optional<std::int64_t> id = parse_id(*id_text);
    if (!id) return error_page(&caller, config, 404, "no job " + *id_text);
    const std::string job_page = "/jobs/" + std::to_string(*id);
    std::lock_guard lock(store_mutex_);
    const bool retry = std::string_view(verb) == "/retry";
    const ActionResult result =
        retry ? store_->retry({*id}, actor) : store_->cancel({*id}, reason, actor);
    return done(action_flash(retry ? "Retry" : "Cancel", result), job_page);
  }
  for (const char* verb : {"/pause", "/resume"}) {
    const bool pause = std::string_view(verb) == "/pause";
    if (const std::optional<std::string> queue = name_between(path, "/queues/", verb)) {
      std::lock_guard lock(store_mutex_);
      const ActionResult result =
          pause ? store_->pause_queue(*queue, actor) : store_->resume_queue(*queue, actor);
      return done(action_flash((pause ? "Pause queue " : "Resume queue ") + *queue, result),
                  "/queues");
    }
    if (const std::optional<std::string> name = name_between(path, "/schedules/", verb)) {
      std::lock_guard lock(store_mutex_);
      const ActionResult result =
          pause ? store_->pause_schedule(*name, actor) : store_->resume_schedule(*name, actor);
      return done(action_flash((pause ? "Pause schedule " : "Resume schedule ") + *name, result),
                  "/schedules");
    }
  }
  return error_page(&caller, config, 404, "no such action: " + path);
}

}  // namespace pgjobd::ui
