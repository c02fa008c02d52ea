// Regular-file-only reading for data/ (see file_io.h for why).
#include "data/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

namespace mn::data {

namespace {
std::string type_of(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "not a regular file";
}

struct Fd {  // closes on every exit path, including throws
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::string describe_file_type(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return type_of(st);
}

std::vector<uint8_t> read_regular_file(const std::string& path, const char* who) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    const int err = errno;
    MN_THROW(who, ": cannot open '", path, "': ", std::strerror(err),
             err == ENOENT ? " (check the path, or the data folder given)" : "");
  }
  struct stat st {};
  MN_DATA_CHECK(::fstat(f.fd, &st) == 0, who, ": cannot inspect '", path, "': ",
                std::strerror(errno));
  MN_DATA_CHECK(S_ISREG(st.st_mode), who, ": '", path, "' is ", type_of(st),
                ", not a regular file: give the path of a file (or remove or rename this entry)");
  // O_NONBLOCK has no effect on reads of a regular file (POSIX), so it stays set:
  // two fewer system calls per file matter when a load opens 19,280 of them.
  std::vector<uint8_t> buf;
  // Read st_size bytes (the size when opened; a file still being written is
  // read as far as it was then). A short read continues; end of file ends it.
  // No extra read to confirm end of file: one system call fewer per file.
  buf.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t k = ::read(f.fd, buf.data() + got, buf.size() - got);
    if (k == 0) break;
    if (k < 0) {
      if (errno == EINTR) continue;
      MN_THROW(who, ": read error on '", path, "': ", std::strerror(errno));
    }
    got += static_cast<size_t>(k);
  }
  buf.resize(got);
  return buf;
}

bool regular_file_or_warn(const std::filesystem::directory_entry& e, const char* who) {
  // The entry's file type comes from the directory listing (d_type) on Linux:
  // no system call per file for the common case.
  std::error_code ec;
  if (!e.is_symlink(ec) && e.is_regular_file(ec)) return true;
  return regular_file_or_warn(e.path(), who);
}

bool regular_file_or_warn(const std::filesystem::path& p, const char* who) {
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return true;
  std::cerr << who << ": skipping '" << p.string() << "': "
            << (::stat(p.c_str(), &st) == 0 ? type_of(st) : std::string("unreadable"))
            << ", not a regular file\n";
  return false;
}

std::vector<std::filesystem::directory_entry> list_dir(const std::filesystem::path& dir,
                                                       const char* who) {
  std::vector<std::filesystem::directory_entry> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(*it);
  MN_DATA_CHECK(!ec, who, ": cannot list the folder '", dir.string(), "': ", ec.message());
  return out;
}

bool parse_int_in_range(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;  // 18 digits cannot overflow int64
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace mn::data
