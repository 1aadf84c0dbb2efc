#pragma once
// libcurl, loaded when the first http handler is made rather than when the daemon starts.
//
// Linked directly, libcurl and the nine libraries it alone needs (nghttp2, ssh2, rtmp,
// psl, brotli, zstd, ...) were loaded at every start, http handlers or not: 2.5-3 ms of
// the 53 ms before a first claim on a small VM, and 2 MB of resident memory
// (bench/README, "Start-up, sixth round").
// Calls go through this table; <curl/curl.h> still gives the types and constants.

#include <curl/curl.h>

#include <ctime>

namespace pgjobd {

struct CurlLibrary {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL* handle);
  CURLcode (*easy_setopt)(CURL* handle, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL* handle, CURLINFO info, ...);
  const char* (*easy_strerror)(CURLcode code);
  std::time_t (*getdate)(const char* date, const std::time_t* unused);
  CURLM* (*multi_init)();
  CURLMcode (*multi_cleanup)(CURLM* multi);
  CURLMcode (*multi_setopt)(CURLM* multi, CURLMoption option, ...);
  CURLMcode (*multi_add_handle)(CURLM* multi, CURL* handle);
  CURLMcode (*multi_remove_handle)(CURLM* multi, CURL* handle);
  CURLMcode (*multi_socket_action)(CURLM* multi, curl_socket_t socket, int events, int* running);
  CURLMsg* (*multi_info_read)(CURLM* multi, int* left);
  const char* (*multi_strerror)(CURLMcode code);
};

// The library, loaded (and curl_global_init run) on the first call, from any thread.
// Throws std::runtime_error naming the library and the loader's reason when it cannot be
// loaded or lacks a function; later calls retry.
const CurlLibrary& curl_library();

}  // namespace pgjobd
