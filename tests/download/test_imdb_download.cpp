// `qnum download imdb` offline: a tar.gz in Stanford's layout (the aclImdb fixture tree,
// packed here with libarchive) served over file:// with its MD5 and size; unpacked into
// <cache>/imdb/aclImdb, where locate_imdb finds it with QNUM_DATA_DIR unset. A wrong MD5
// leaves nothing; archives that would write outside the target or carry links are refused.
#include <doctest/doctest.h>

#include <archive.h>
#include <archive_entry.h>

#include <string>
#include <utility>
#include <vector>

#include "download/helpers.hpp"
#include "qnum/data/imdb.hpp"
#include "qnum/data/imdb_download.hpp"
#include "qnum/io/archive.hpp"
#include "qnum/io/atomic_file.hpp"

using namespace qnum;
using namespace qnum::data;
using namespace qnum_test;

namespace {

const fs::path kAclImdb = fs::path(QNUM_TEST_SOURCE_DIR) / "fixtures" / "datasets" / "aclImdb";

/// One tar entry: a name and its file contents, or a symlink target when `link` is set.
struct TarEntry {
  std::string name, data;
  bool link = false;
};

/// Writes a gzip-compressed tar (pax) of `entries` at `path`.
void write_tar_gz(const fs::path& path, const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
  for (const auto& e : entries) {
    archive_entry* h = archive_entry_new();
    archive_entry_set_pathname(h, e.name.c_str());
    if (e.link) {
      archive_entry_set_filetype(h, AE_IFLNK);
      archive_entry_set_symlink(h, e.data.c_str());
      archive_entry_set_size(h, 0);
    } else {
      archive_entry_set_filetype(h, AE_IFREG);
      archive_entry_set_size(h, static_cast<la_int64_t>(e.data.size()));
    }
    archive_entry_set_perm(h, 0644);
    REQUIRE(archive_write_header(a, h) == ARCHIVE_OK);
    if (!e.link) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(h);
  }
  archive_write_close(a);
  archive_write_free(a);
}

/// The aclImdb fixture tree as tar entries under "aclImdb/", plus an unsup review and a
/// README as the real archive has.
std::vector<TarEntry> aclimdb_entries() {
  std::vector<TarEntry> v;
  for (const auto& e : fs::recursive_directory_iterator(kAclImdb))
    if (e.is_regular_file()) v.push_back({"aclImdb/" + fs::relative(e.path(), kAclImdb).string(), read_file(e.path())});
  v.push_back({"aclImdb/train/unsup/0_0.txt", "an unlabelled review"});
  v.push_back({"aclImdb/README", "Large Movie Review Dataset v1.0"});
  return v;
}

ImdbDownloadOptions options_for(const fs::path& archive, const fs::path& dir) {
  ImdbDownloadOptions o;
  o.url = file_url(archive);
  const std::string bytes = read_file(archive);
  o.expected.size = bytes.size();
  o.expected.md5 = digest_hex<Md5>(bytes);
  o.dir = dir;
  return o;
}

}  // namespace

TEST_CASE("download_imdb: archive checked, unpacked into the aclImdb layout, found by locate_imdb") {
  if (!have_curl()) return;
  TempDir t;
  const auto archive = t.path / "remote" / "aclImdb_v1.tar.gz";
  fs::create_directories(archive.parent_path());
  write_tar_gz(archive, aclimdb_entries());
  const auto cache = t.path / "cache";

  const auto root = download_imdb(options_for(archive, cache));
  CHECK(root == cache / "imdb" / "aclImdb");
  CHECK(read_aclimdb(root, "train").rows.size() == read_aclimdb(kAclImdb, "train").rows.size());
  CHECK(read_aclimdb(root, "test").rows.size() == read_aclimdb(kAclImdb, "test").rows.size());
  CHECK(fs::exists(root / "train" / "unsup" / "0_0.txt"));
  CHECK(!fs::exists(cache / "imdb" / "aclImdb_v1.tar.gz"));         // removed after unpacking
  CHECK(files_in(cache / "imdb").size() == files_in(root).size());  // no temporaries beside it

  EnvGuard data("QNUM_DATA_DIR", nullptr);
  EnvGuard where("QNUM_CACHE_DIR", cache.c_str());
  const auto found = locate_imdb();
  CHECK(found.layout == ImdbFiles::Layout::aclimdb);
  CHECK(found.train == root);

  // Already there: nothing is fetched (the URL is not even read).
  auto again = options_for(archive, cache);
  again.url = "http://127.0.0.1:9/unreachable.tar.gz";
  CHECK(download_imdb(again) == root);
}

TEST_CASE("download_imdb: a wrong MD5 leaves nothing and says what to do by hand") {
  if (!have_curl()) return;
  TempDir t;
  const auto archive = t.path / "aclImdb_v1.tar.gz";
  write_tar_gz(archive, aclimdb_entries());
  auto o = options_for(archive, t.path / "cache");
  o.expected.md5 = std::string(32, '0');
  const auto msg = error_of([&] { download_imdb(o); });
  CHECK(contains(msg, "imdb: download failed: download of file://"));
  CHECK(contains(msg, "checksum mismatch (MD5"));
  CHECK(contains(msg, "to install it by hand, download " + o.url));
  CHECK(contains(msg, (t.path / "cache" / "imdb" / "aclImdb").string() + "/train/pos exists"));
  CHECK(files_in(t.path / "cache").empty());
}

TEST_CASE("download_imdb: offline, the error is one line naming the archive and the folder") {
  if (!have_curl()) return;
  TempDir t;
  ImdbDownloadOptions o;
  o.url = "http://127.0.0.1:9/aclImdb_v1.tar.gz";
  o.dir = t.path;
  const auto msg = error_of([&] { download_imdb(o); });
  CHECK(contains(msg, "curl exit 7"));
  CHECK(contains(msg, "to install it by hand"));
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(files_in(t.path).empty());
  CHECK(!fs::exists(t.path / "imdb"));  // no empty folder left behind
}

TEST_CASE("extract_archive refuses entries outside the target, links, and corrupt archives") {
  TempDir t;
  const auto dest = t.path / "out";
  SUBCASE("..") {
    write_tar_gz(t.path / "a.tar.gz", {{"ok.txt", "fine"}, {"../evil.txt", "escaped"}});
    CHECK(contains(error_of([&] { extract_archive(t.path / "a.tar.gz", dest); }),
                   "entry '../evil.txt' leaves the target directory"));
    CHECK(!fs::exists(t.path / "evil.txt"));
  }
  SUBCASE("absolute") {
    write_tar_gz(t.path / "a.tar.gz", {{"/tmp/qnum-evil.txt", "escaped"}});
    CHECK(contains(error_of([&] { extract_archive(t.path / "a.tar.gz", dest); }), "has an absolute or empty name"));
  }
  SUBCASE("symlink") {
    write_tar_gz(t.path / "a.tar.gz", {{"link", "/etc/passwd", true}});
    CHECK(contains(error_of([&] { extract_archive(t.path / "a.tar.gz", dest); }),
                   "entry 'link' is not a regular file or directory"));
  }
  SUBCASE("truncated") {
    write_tar_gz(t.path / "full.tar.gz", aclimdb_entries());
    const auto bytes = read_file(t.path / "full.tar.gz");
    write_file_atomic(t.path / "a.tar.gz", bytes.substr(0, bytes.size() / 2));
    CHECK(contains(error_of([&] { extract_archive(t.path / "a.tar.gz", dest); }), "archive '"));
  }
  CHECK(!fs::exists(dest));
  CHECK(files_in(t.path).size() <= 2);  // only the archives
  for (const auto& f : files_in(t.path)) CHECK(f.ends_with(".tar.gz"));
}
