// TensorBoard event files: the scalars of a training run or a study, written as TensorBoard
// reads them, and read back.
//
// A file `events.out.tfevents.<seconds>.<host>.<pid>.<n>` is a sequence of TFRecords
// (length as uint64 little-endian, its masked CRC32C, the bytes, their masked CRC32C) each
// holding one tensorflow.Event message: first {wall_time, file_version "brain.Event:2"}, then
// {wall_time, step, summary {value {tag, simple_value}}} per scalar. Only these fields are
// written, so they are encoded here (protobuf's wire format: varint keys, 64-bit wall_time,
// 32-bit float) rather than through protoc-generated classes of TensorFlow's event.proto
// (docs/dependencies.md); TensorBoard's own reader reading them back is the test
// (tests/train/test_tensorboard.sh).
//
// A log is a folder (a TensorBoard "run"). EventWriter appends to a new file of it and
// flushes every record, so a live `tensorboard --logdir` follows the run, and a killed writer
// loses at most the record it was writing (read_scalars stops at a torn record). Resuming a
// run truncates the log to the resumed point (truncate_log) before writing again, so each
// (tag, step) appears once; clear_log starts it afresh.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"

namespace qnum::io::tensorboard {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`, continuing `crc`.
inline std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (unsigned char b : data) crc = table[(crc ^ b) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

/// TFRecord's masked CRC32C: rotate right by 15, add 0xa282ead8.
inline std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/// One scalar of a log: its tag, step, value and wall time (seconds since the epoch).
struct Scalar {
  std::string tag;
  std::int64_t step = 0;
  float value = 0;
  double wall_time = 0;
  bool operator==(const Scalar&) const = default;
};

/// Seconds since the Unix epoch, as TensorBoard's wall_time.
inline double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace detail {

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void put_fixed(std::string& out, T v) {  // protobuf's fixed64/fixed32: little-endian
  static_assert(std::endian::native == std::endian::little, "qnum assumes a little-endian host");
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

inline void put_bytes_field(std::string& out, int field, std::string_view bytes) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

/// A protobuf reader over one message's bytes; a malformed message is a qnum::Error.
struct WireReader {
  std::string_view s;
  std::size_t pos = 0;
  std::string what;

  bool done() const { return pos >= s.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      qnum::detail::require(pos < s.size(), what, ": truncated varint");
      const auto b = static_cast<unsigned char>(s[pos++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    qnum::detail::fail(what, ": varint longer than 10 bytes");
  }
  std::string_view take(std::size_t n) {
    qnum::detail::require(n <= s.size() - pos, what, ": a field runs past the message's end");
    const auto v = s.substr(pos, n);
    pos += n;
    return v;
  }
  template <class T>
  T fixed() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  /// Skips a field of wire type `type` (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
  void skip(unsigned type) {
    switch (type) {
      case 0: varint(); return;
      case 1: take(8); return;
      case 2: take(varint()); return;
      case 5: take(4); return;
      default: qnum::detail::fail(what, ": unsupported wire type ", type);
    }
  }
};

/// The TFRecord around `data`.
inline std::string frame_record(std::string_view data) {
  std::string rec, len;
  put_fixed<std::uint64_t>(len, data.size());
  rec += len;
  put_fixed<std::uint32_t>(rec, masked_crc32c(len));
  rec.append(data);
  put_fixed<std::uint32_t>(rec, masked_crc32c(data));
  return rec;
}

/// The Event opening every file: {wall_time = 1, file_version = 3}.
inline std::string file_version_event(double wall_time) {
  std::string e;
  put_varint(e, (1u << 3) | 1);
  put_fixed<double>(e, wall_time);
  put_bytes_field(e, 3, "brain.Event:2");
  return e;
}

/// The Event of one scalar: {wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}}}.
inline std::string scalar_event(const Scalar& s) {
  std::string value;
  put_bytes_field(value, 1, s.tag);
  put_varint(value, (2u << 3) | 5);
  put_fixed<float>(value, s.value);
  std::string summary;
  put_bytes_field(summary, 1, value);
  std::string e;
  put_varint(e, (1u << 3) | 1);
  put_fixed<double>(e, s.wall_time);
  put_varint(e, (2u << 3) | 0);
  put_varint(e, static_cast<std::uint64_t>(s.step));
  put_bytes_field(e, 5, summary);
  return e;
}

/// The scalars of one Event message (none for file_version and other events).
inline void decode_event(std::string_view bytes, const std::string& what, std::vector<Scalar>& out) {
  WireReader r{bytes, 0, what};
  double wall = 0;
  std::int64_t step = 0;
  std::vector<Scalar> values;
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const unsigned type = key & 7u;
    const std::uint64_t field = key >> 3;
    if (field == 1 && type == 1) {
      wall = r.fixed<double>();
    } else if (field == 2 && type == 0) {
      step = static_cast<std::int64_t>(r.varint());
    } else if (field == 5 && type == 2) {
      WireReader summary{r.take(r.varint()), 0, what};
      while (!summary.done()) {
        const std::uint64_t sk = summary.varint();
        if (sk >> 3 != 1 || (sk & 7u) != 2) {
          summary.skip(sk & 7u);
          continue;
        }
        WireReader v{summary.take(summary.varint()), 0, what};
        Scalar s;
        bool simple = false;
        while (!v.done()) {
          const std::uint64_t vk = v.varint();
          if (vk >> 3 == 1 && (vk & 7u) == 2)
            s.tag = std::string(v.take(v.varint()));
          else if (vk >> 3 == 2 && (vk & 7u) == 5)
            s.value = v.fixed<float>(), simple = true;
          else
            v.skip(vk & 7u);
        }
        if (simple) values.push_back(std::move(s));
      }
    } else {
      r.skip(type);
    }
  }
  for (auto& s : values) {
    s.step = step;
    s.wall_time = wall;
    out.push_back(std::move(s));
  }
}

inline bool is_event_file(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.starts_with("events.out.tfevents.");
}

/// The `<seconds>` field of an event file's name (0 if it has none).
inline std::int64_t event_file_seconds(const std::filesystem::path& p) {
  const std::string rest = p.filename().string().substr(std::string_view("events.out.tfevents.").size());
  std::int64_t v = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') break;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// This host's name, as event file names carry it ("" when unknown).
inline std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host;
}

/// Refuses a log folder that is a file, and creates it.
inline void make_log_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  qnum::detail::require(!std::filesystem::exists(dir, ec) || std::filesystem::is_directory(dir, ec), "tensorboard: '",
                        dir.string(), "' is a file, not a folder for event files");
  std::filesystem::create_directories(dir, ec);
  qnum::detail::require(!ec, "tensorboard: cannot create '", dir.string(), "': ", ec.message());
}

}  // namespace detail

/// The event files of a log folder, in the order TensorBoard reads them (by name).
inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && detail::is_event_file(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The scalars of one event file, in file order. A torn last record (a writer killed
/// mid-record) ends the read; a corrupt one (bad CRC) is a qnum::Error naming the file and offset.
inline std::vector<Scalar> read_event_file(const std::filesystem::path& file) {
  const std::string bytes = read_file(file);
  std::vector<Scalar> out;
  std::size_t pos = 0;
  const std::string name = "tensorboard: '" + file.string() + "'";
  while (bytes.size() - pos >= 12) {
    const std::string_view len_bytes(bytes.data() + pos, 8);
    std::uint64_t len = 0;
    std::uint32_t len_crc = 0;
    std::memcpy(&len, len_bytes.data(), 8);
    std::memcpy(&len_crc, bytes.data() + pos + 8, 4);
    qnum::detail::require(len_crc == masked_crc32c(len_bytes), name, ": bad length checksum at byte ", pos);
    if (len > bytes.size() - pos - 12 || bytes.size() - pos - 12 - len < 4) break;  // torn
    const std::string_view data(bytes.data() + pos + 12, len);
    std::uint32_t data_crc = 0;
    std::memcpy(&data_crc, bytes.data() + pos + 12 + len, 4);
    qnum::detail::require(data_crc == masked_crc32c(data), name, ": bad data checksum at byte ", pos);
    detail::decode_event(data, name + " at byte " + std::to_string(pos), out);
    pos += 12 + len + 4;
  }
  return out;
}

/// Every scalar of a log folder (its event files in name order).
inline std::vector<Scalar> read_scalars(const std::filesystem::path& dir) {
  std::vector<Scalar> all;
  for (const auto& f : event_files(dir)) {
    auto s = read_event_file(f);
    all.insert(all.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  return all;
}

/// Writes `scalars` as the only event file of `dir`, atomically: the file is written under a
/// temporary name TensorBoard ignores and renamed into place, then the folder's other event
/// files are removed. `seconds` names the file (keep it below later writers' names).
inline void write_log_atomic(const std::filesystem::path& dir, const std::vector<Scalar>& scalars,
                             std::int64_t seconds) {
  detail::make_log_dir(dir);
  const auto file = dir / ("events.out.tfevents." + std::to_string(seconds) + "." + detail::host_name() + ".qnum");
  std::string bytes = detail::frame_record(detail::file_version_event(static_cast<double>(seconds)));
  for (const auto& s : scalars) bytes += detail::frame_record(detail::scalar_event(s));
  const auto tmp = dir / (".tmp.qnum-log." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    qnum::detail::require(static_cast<bool>(out), "tensorboard: cannot write '", tmp.string(), "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  qnum::detail::require(!ec, "tensorboard: cannot rename into '", file.string(), "': ", ec.message());
  for (const auto& f : event_files(dir))
    if (f != file) std::filesystem::remove(f, ec);
}

/// Keeps the scalars of `dir` with step <= max_step (a resumed run's point) in one file and
/// removes the rest; a folder without event files stays as it is.
inline void truncate_log(const std::filesystem::path& dir, std::int64_t max_step) {
  const auto files = event_files(dir);
  if (files.empty()) return;
  std::vector<Scalar> keep;
  for (auto& s : read_scalars(dir))
    if (s.step <= max_step) keep.push_back(std::move(s));
  write_log_atomic(dir, keep, detail::event_file_seconds(files.front()));
}

/// Removes the event files of `dir` (a fresh run's log starts empty).
inline void clear_log(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& f : event_files(dir)) std::filesystem::remove(f, ec);
}

/// Appends scalars to a new event file in a log folder (created if missing; a file of that
/// name is a qnum::Error). Every record is flushed as it is written.
class EventWriter {
 public:
  explicit EventWriter(const std::filesystem::path& dir) {
    detail::make_log_dir(dir);
    // Named after every file already there, so TensorBoard reads this one last.
    std::int64_t seconds = static_cast<std::int64_t>(wall_time_now());
    for (const auto& f : event_files(dir)) seconds = std::max(seconds, detail::event_file_seconds(f) + 1);
    file_ = dir / ("events.out.tfevents." + std::to_string(seconds) + "." + detail::host_name() + "." +
                   std::to_string(::getpid()) + ".0");
    out_.open(file_, std::ios::binary | std::ios::trunc);
    qnum::detail::require(out_.is_open(), "tensorboard: cannot create '", file_.string(), "'");
    write(detail::file_version_event(wall_time_now()));
  }

  /// Appends one scalar (wall_time 0: now).
  void add_scalar(std::string_view tag, float value, std::int64_t step, double wall_time = 0) {
    write(detail::scalar_event({std::string(tag), step, value, wall_time > 0 ? wall_time : wall_time_now()}));
  }

  /// The file being written.
  const std::filesystem::path& file() const { return file_; }

 private:
  void write(const std::string& event) {
    const std::string rec = detail::frame_record(event);
    out_.write(rec.data(), static_cast<std::streamsize>(rec.size()));
    out_.flush();
    qnum::detail::require(static_cast<bool>(out_), "tensorboard: cannot write '", file_.string(), "'");
  }

  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace qnum::io::tensorboard
