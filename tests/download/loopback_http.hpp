// A minimal HTTP/1.1 server for the download tests: listens on 127.0.0.1 only (an ephemeral
// port), serves fixed bodies by request target, honours `Range: bytes=N-` (206), can cut a
// response short once (to test resuming) and records each request line and Range header.
// Bounded: one connection at a time, 5 s socket timeouts, stopped by the destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace qnum_test {

class LoopbackHttp {
 public:
  struct Route {
    std::string body;
    std::size_t cut_after = std::string::npos;  ///< first response: send this many body bytes, then close
    bool ranges = true;                         ///< false: ignore Range (always 200 with the whole body)
  };

  explicit LoopbackHttp(std::map<std::string, Route> routes) : routes_(std::move(routes)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("loopback server: socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd_);
      throw std::runtime_error("loopback server: bind/listen failed");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHttp() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  LoopbackHttp(const LoopbackHttp&) = delete;
  LoopbackHttp& operator=(const LoopbackHttp&) = delete;

  std::string url(const std::string& target) const { return "http://127.0.0.1:" + std::to_string(port_) + target; }

  /// "GET <target>" and, when sent, " Range: <value>", one per request served.
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

 private:
  void serve() {
    int served = 0;
    while (!stop_ && served < 1000) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      ++served;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      handle(c);
      ::close(c);
    }
  }

  void handle(int c) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
      const auto n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<std::size_t>(n));
    }
    const auto sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) return;
    const std::string target = req.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string range;
    for (const std::string key : {"\r\nRange: ", "\r\nrange: "})
      if (const auto r = req.find(key); r != std::string::npos)
        range = req.substr(r + key.size(), req.find("\r\n", r + 2) - r - key.size());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      log_.push_back("GET " + target + (range.empty() ? "" : " Range: " + range));
    }
    const auto it = routes_.find(target);
    if (it == routes_.end()) {
      send_all(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
      return;
    }
    Route& r = it->second;
    std::size_t from = 0;
    if (r.ranges && range.rfind("bytes=", 0) == 0) from = std::stoul(range.substr(6));
    if (from > r.body.size()) {
      send_all(c, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    std::string head = from > 0 ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(from) + "-" +
                                      std::to_string(r.body.size() - 1) + "/" + std::to_string(r.body.size()) + "\r\n"
                                : std::string("HTTP/1.1 200 OK\r\n");
    head += "Content-Length: " + std::to_string(r.body.size() - from) + "\r\nConnection: close\r\n\r\n";
    std::size_t n = r.body.size() - from;
    if (r.cut_after != std::string::npos) {
      n = std::min(n, r.cut_after);
      r.cut_after = std::string::npos;
    }
    send_all(c, head + r.body.substr(from, n));
  }

  static void send_all(int c, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
      const auto n = ::send(c, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

  std::map<std::string, Route> routes_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> log_;
};

}  // namespace qnum_test
