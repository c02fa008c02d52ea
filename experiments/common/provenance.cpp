// Run provenance (provenance.h).
#include "experiments/common/provenance.h"

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "experiments/common/build_info.h"
#include "runtime/cpu_features.h"
#include "runtime/parallel.h"

namespace mn::exp {

std::string shell_command(int argc, char* const* argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i] ? argv[i] : "";
    bool plain = !a.empty();
    for (char c : a)
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,+@%").find(c) != std::string::npos);
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

namespace {
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}
}  // namespace

Json provenance_json(int argc, char* const* argv, const Device& device) {
  const BuildInfo& b = build_info();
  Json p;
  p["command"] = shell_command(argc, argv);
  p["commit"] = b.commit;
  p["dirty"] = b.dirty;
  p["build_type"] = b.build_type;
  p["compiler"] = b.compiler;
  p["cuda_build"] = b.cuda;
  Json m;
  m["cpu"] = cpu_model_name();
  m["cores"] = static_cast<int64_t>(std::thread::hardware_concurrency());
  m["threads"] = static_cast<int64_t>(num_threads());
  m["cpu_isa"] = cpu_isa_name(cpu_isa());
  p["machine"] = m;
  p["device"] = device.str();
  if (device.is_cuda()) {
    Json g;
    g["name"] = device_name(device);
    g["driver"] = cuda_driver_version();
    p["gpu"] = g;
  }
  p["start_utc"] = utc_now();
  return p;
}

std::string provenance_markdown(const Json& p) {
  std::ostringstream o;
  auto str = [&](const char* k) { return p.contains(k) && p[k].is_string() ? p[k].get<std::string>() : std::string("?"); };
  o << "- command: `" << str("command") << "`\n";
  o << "- built from commit " << str("commit") << (p.value("dirty", false) ? " (with uncommitted changes)" : "")
    << ", " << str("build_type") << ", " << str("compiler") << "\n";
  if (p.contains("machine")) {
    const Json& m = p["machine"];
    o << "- machine: " << m.value("cpu", std::string("?")) << ", " << m.value("threads", int64_t(0)) << " of "
      << m.value("cores", int64_t(0)) << " cores, CPU path " << m.value("cpu_isa", std::string("?"));
    if (p.contains("gpu")) o << ", GPU " << p["gpu"].value("name", std::string("?")) << " (driver "
                             << p["gpu"].value("driver", std::string("?")) << ")";
    o << "\n";
  }
  o << "- started " << str("start_utc");
  if (p.contains("wall_seconds") && p["wall_seconds"].is_number())
    o << ", wall time " << p["wall_seconds"].get<double>() << " s";
  o << "\n";
  return o.str();
}

}  // namespace mn::exp
