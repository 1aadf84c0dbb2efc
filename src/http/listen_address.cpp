// Listen addresses: their host part, and why one cannot be bound.
#include "http/listen_address.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <system_error>

namespace pgjobd {

std::string listen_host(const std::string& listen) {
  const std::size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return host;
}

std::string bind_failure(const std::string& listen) {
  std::string host = listen_host(listen);
  if (host == "localhost") host = "127.0.0.1";  // as civetweb is given it
  const std::size_t colon = listen.rfind(':');
  const std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return gai_strerror(error);
  }
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  int failed = fd < 0 ? errno : 0;
  if (fd >= 0) {
    const int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) failed = errno;
    close(fd);
  }
  freeaddrinfo(found);
  if (failed == 0) return "";
  // Not strerror, which is not thread-safe. "Address already in use" reads as the middle of
  // our sentence: lower case.
  std::string why = std::error_code(failed, std::generic_category()).message();
  why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  return why;
}

}  // namespace pgjobd
