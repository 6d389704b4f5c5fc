#include "server/http2_frame_guard.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

constexpr unsigned char kHeaders = 0x1;
constexpr unsigned char kRstStream = 0x3;
constexpr unsigned char kSettings = 0x4;
constexpr unsigned char kAckFlag = 0x1;

ino_t InodeOf(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

}  // namespace

bool Http2FrameCounter::Feed(const unsigned char* data, size_t size, absl::Time now) {
  while (size > 0 && why_.empty()) {
    if (preface_left_ > 0) {
      const size_t skip = std::min(size, preface_left_);
      preface_left_ -= skip;
      data += skip;
      size -= skip;
    } else if (payload_left_ > 0) {
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(size, payload_left_));
      payload_left_ -= skip;
      data += skip;
      size -= skip;
    } else {
      const size_t take = std::min(size, sizeof(header_) - header_have_);
      std::copy(data, data + take, header_ + header_have_);
      header_have_ += take;
      data += take;
      size -= take;
      if (header_have_ == sizeof(header_)) {
        header_have_ = 0;
        OnFrameHeader(now);
      }
    }
  }
  return why_.empty();
}

void Http2FrameCounter::OnFrameHeader(absl::Time now) {
  payload_left_ = (uint64_t{header_[0]} << 16) | (uint64_t{header_[1]} << 8) | header_[2];
  const unsigned char type = header_[3];
  const unsigned char flags = header_[4];
  const uint32_t stream = ((uint32_t{header_[5]} & 0x7f) << 24) | (uint32_t{header_[6]} << 16) |
                          (uint32_t{header_[7]} << 8) | header_[8];
  if (type == kSettings && (flags & kAckFlag) != 0) settings_acked_ = true;
  if (type == kHeaders && stream > last_stream_id_) {
    last_stream_id_ = stream;
    ++streams_opened_;
    if (!settings_acked_ && limits_.max_streams_before_ack > 0 &&
        streams_opened_ > limits_.max_streams_before_ack) {
      why_ = absl::StrCat("opened more than ", limits_.max_streams_before_ack,
                          " streams without acknowledging the server's SETTINGS");
    }
  }
  if (type == kRstStream && limits_.max_resets_per_window > 0) {
    if (now - window_start_ >= limits_.reset_window) {
      window_start_ = now;
      resets_in_window_ = 0;
    }
    if (++resets_in_window_ > limits_.max_resets_per_window) {
      why_ = absl::StrCat("reset more than ", limits_.max_resets_per_window, " streams in ",
                          absl::FormatDuration(limits_.reset_window));
    }
  }
}

Http2FrameGuard& Http2FrameGuard::Get() {
  static Http2FrameGuard* const guard = new Http2FrameGuard();
  return *guard;
}

void Http2FrameGuard::Watch(int fd, ino_t inode, const Http2Limits& limits) {
  absl::MutexLock lock(&mutex_);
  watched_.insert_or_assign(fd, Watched{inode, Http2FrameCounter(limits)});
  any_.store(true, std::memory_order_release);
}

bool Http2FrameGuard::Received(int fd, const msghdr& message, size_t size) {
  if (!any_.load(std::memory_order_acquire)) return true;
  std::string why;
  {
    absl::MutexLock lock(&mutex_);
    auto it = watched_.find(fd);
    if (it == watched_.end()) return true;
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < message.msg_iovlen && size > 0; ++i) {
      const size_t part = std::min(size, message.msg_iov[i].iov_len);
      it->second.counter.Feed(static_cast<const unsigned char*>(message.msg_iov[i].iov_base), part,
                              now);
      size -= part;
    }
    if (it->second.counter.why().empty()) return true;
    // The descriptor may since belong to another file (its connection
    // closed, the number reused): act only on the connection registered.
    const bool same = InodeOf(fd) == it->second.inode;
    why = it->second.counter.why();
    watched_.erase(it);
    if (watched_.empty()) any_.store(false, std::memory_order_release);
    if (!same) return true;
  }
  const int64_t count = closed_.fetch_add(1, std::memory_order_relaxed) + 1;
  // The 1st, 2nd, 4th, 8th ... of them: a flood does not flood the log.
  if ((count & (count - 1)) == 0) {
    std::fprintf(stderr,
                 "habitat-server: closed a connection that %s (an HTTP/2 flood; %lld so far; "
                 "docs/operations.md)\n",
                 why.c_str(), static_cast<long long>(count));
  }
  return false;
}

}  // namespace habitat
