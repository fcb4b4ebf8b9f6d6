#include "cc/engine/benchmark_devices.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

namespace ucudnn {

namespace {
std::string Trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}
}  // namespace

bool ParseBenchmarkDevices(const std::string& spec, bool* all, std::vector<int>* ids,
                           std::string* error) {
  *all = false;
  ids->clear();
  const std::string value = Trim(spec);
  if (value.empty()) return true;
  if (value == "all") {
    *all = true;
    return true;
  }
  std::set<int> seen;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string token = Trim(value.substr(start, comma - start));
    const bool digits = !token.empty() && token.size() <= 6 &&
                        std::all_of(token.begin(), token.end(),
                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits) {
      *error = "UCUDNN_BENCHMARK_DEVICES must be 'all' or comma-separated GPU ids such as "
               "'0,1'; got '" + spec + "'";
      ids->clear();
      return false;
    }
    seen.insert(std::stoi(token));
    start = comma + 1;
  }
  ids->assign(seen.begin(), seen.end());
  return true;
}

std::vector<std::vector<int64_t>> SpreadSizes(const std::vector<int64_t>& sizes, int devices) {
  std::vector<std::vector<int64_t>> shares(std::max(devices, 1));
  std::vector<int64_t> sorted = sizes;
  std::sort(sorted.begin(), sorted.end(), std::greater<int64_t>());
  std::vector<int64_t> load(shares.size(), 0);
  for (int64_t size : sorted) {
    // The least loaded GPU; ties go to the lowest index (the kernel's own first).
    const size_t to = std::min_element(load.begin(), load.end()) - load.begin();
    shares[to].push_back(size);
    load[to] += size;
  }
  for (auto& share : shares) std::sort(share.begin(), share.end());
  return shares;
}

}  // namespace ucudnn
