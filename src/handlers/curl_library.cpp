// libcurl through dlopen (see the header).
#include "handlers/curl_library.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace pgjobd {
namespace {

// The soname libcurl4 and libcurl4-openssl-dev (CMakeLists.txt) install; its ABI has
// been stable since 2006.
constexpr const char* kSoname = "libcurl.so.4";

std::string loader_error() {
  const char* reason = dlerror();
  return reason != nullptr ? reason : "unknown reason";
}

template <typename Function>
void bind(void* library, const char* name, Function*& function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    throw std::runtime_error(std::string("http handler: ") + kSoname + " has no " + name + " (" +
                             loader_error() + ")");
  }
  // dlsym's documented use: an object pointer that holds a function's address.
  function = reinterpret_cast<Function*>(symbol);
}

CurlLibrary load() {
  // Never closed: the table is the process's from here on.
  void* library = dlopen(kSoname, RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) {
    throw std::runtime_error(std::string("http handler: cannot load ") + kSoname + " (" +
                             loader_error() + "); install libcurl4 (Debian) or its equivalent");
  }
  CurlLibrary curl{};
  bind(library, "curl_global_init", curl.global_init);
  bind(library, "curl_easy_init", curl.easy_init);
  bind(library, "curl_easy_cleanup", curl.easy_cleanup);
  bind(library, "curl_easy_setopt", curl.easy_setopt);
  bind(library, "curl_easy_getinfo", curl.easy_getinfo);
  bind(library, "curl_easy_strerror", curl.easy_strerror);
  bind(library, "curl_getdate", curl.getdate);
  bind(library, "curl_multi_init", curl.multi_init);
  bind(library, "curl_multi_cleanup", curl.multi_cleanup);
  bind(library, "curl_multi_setopt", curl.multi_setopt);
  bind(library, "curl_multi_add_handle", curl.multi_add_handle);
  bind(library, "curl_multi_remove_handle", curl.multi_remove_handle);
  bind(library, "curl_multi_socket_action", curl.multi_socket_action);
  bind(library, "curl_multi_info_read", curl.multi_info_read);
  bind(library, "curl_multi_strerror", curl.multi_strerror);
  // Once, before any handle: curl_global_init is not thread-safe, and a static's
  // initialisation (curl_library) runs on one thread at a time.
  const CURLcode result = curl.global_init(CURL_GLOBAL_DEFAULT);
  if (result != CURLE_OK) {
    throw std::runtime_error(std::string("curl_global_init failed: ") + curl.easy_strerror(result));
  }
  return curl;
}

}  // namespace

const CurlLibrary& curl_library() {
  // Initialised once, with no lock afterwards; an initialisation that throws is tried
  // again at the next call.
  static const CurlLibrary loaded = load();
  return loaded;
}

}  // namespace pgjobd
