#include "cc/engine/division_groups.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace ucudnn {
namespace {

struct Group {
  std::set<const void*> members;
  bool dirty = false;     // members joined since the last division
  bool dividing = false;  // a callback is running for this group
};

std::mutex& GroupsMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::pair<int, int64_t>, Group>& Groups() {
  static auto* groups = new std::map<std::pair<int, int64_t>, Group>();
  return *groups;
}

std::atomic<DivisionCallback>& Callback() {
  static std::atomic<DivisionCallback> callback{nullptr};
  return callback;
}

}  // namespace

void SetDivisionCallback(DivisionCallback callback) { Callback().store(callback); }

void NoteGroupRun(int device, int64_t total_workspace, const void* kernel) {
  const std::pair<int, int64_t> id(device, total_workspace);
  {
    std::lock_guard<std::mutex> lock(GroupsMutex());
    Group& group = Groups()[id];
    if (group.members.insert(kernel).second) {
      group.dirty = true;
      return;
    }
    if (!group.dirty || group.dividing) return;
    group.dirty = false;
    group.dividing = true;
  }
  const DivisionCallback callback = Callback().load();
  if (callback != nullptr) callback(device, total_workspace);
  std::lock_guard<std::mutex> lock(GroupsMutex());
  Groups()[id].dividing = false;
}

}  // namespace ucudnn
