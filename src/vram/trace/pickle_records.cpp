// Trace entries compacted into records as the pickle machine reads them, and their frames dropped
// (pickle_machine.hpp).
#include "vram/trace/pickle_machine.hpp"

#include <limits>

namespace vram::detail {

bool pickle_machine::compact(ref dict, std::size_t m) {
  pickle_tree::record rec;
  std::optional<ref> dropped;
  if (!as_record(stack_.data() + m, stack_.size() - m, rec, dropped)) return false;
  tree_.records_.push_back(rec);
  const ref r = make(kind::record, tree_.records_.size() - 1);
  if (dropped) drop_frames(*dropped, tree_.containers_[pickle_tree::payload(dict)].born);
  // The record replaces the dict under the MARK and in the memo, and the dict's slot is reused. (A
  // hand-made pickle that kept another reference to the dict, by DUP, reads another container there: a
  // wrong value, never a wrong access.)
  stack_[m - 1] = r;
  if (const std::uint64_t slot = tree_.containers_[pickle_tree::payload(dict)].memo; slot != ~std::uint64_t{0}) {
    if (slot < memo_.size()) memo_[slot] = r;
    else sparse_memo_[slot] = r;
  }
  free_containers_.push_back(pickle_tree::payload(dict));
  stack_.resize(m);
  return true;
}

void pickle_machine::forget(std::uint64_t index, ref r) {
  if (index < memo_.size()) {
    if (memo_[index] == r) memo_[index] = make(kind::none);
  } else if (const auto it = sparse_memo_.find(index); it != sparse_memo_.end() && it->second == r) {
    it->second = make(kind::none);
  }
}

bool pickle_machine::as_record(const ref* kv, std::size_t n, pickle_tree::record& rec, std::optional<ref>& dropped) {
  bool tagged = false;
  for (std::size_t i = 0; i + 1 < n; i += 2) {
    const ref k = kv[i], v = kv[i + 1];
    if (tree_.kind_of(k) != kind::string) return false;
    const int role = role_of(pickle_tree::payload(k));
    if (role == role_tag) {
      if (tree_.kind_of(v) != kind::string || pickle_tree::payload(v) > std::numeric_limits<std::uint32_t>::max())
        return false;
      rec.tag = static_cast<std::uint32_t>(pickle_tree::payload(v));
      tagged = true;
    } else if (role >= 0 && role < 4) {
      if (tree_.kind_of(v) != kind::integer) return false;
      rec.fields[role] = tree_.integer(v);
      rec.present |= static_cast<std::uint8_t>(1u << role);
    } else if (role == role_dropped && tree_.kind_of(v) == kind::list) {
      dropped = v;
    }
  }
  return tagged;
}

void pickle_machine::drop_frames(ref list, std::uint64_t dict_born) {
  constexpr std::uint64_t freed = ~std::uint64_t{0};
  const std::uint64_t slot = pickle_tree::payload(list);
  const pickle_tree::container c = tree_.containers_[slot];
  if (c.born == freed || c.born < dict_born) return;
  regions_.clear();
  auto release = [&](std::uint64_t s, kind k) {
    auto& x = tree_.containers_[s];
    forget(x.memo, make(k, s));
    regions_.emplace_back(x.offset, x.capacity);
    x = pickle_tree::container{};
    x.born = freed;
    free_containers_.push_back(s);
  };
  for (const ref item : tree_.items(list)) {
    const kind k = tree_.kind_of(item);
    if (k != kind::dict && k != kind::list && k != kind::tuple) continue;
    const std::uint64_t child = pickle_tree::payload(item);
    const std::uint64_t born = tree_.containers_[child].born;
    if (child != slot && born != freed && born >= c.born) release(child, k);  // made inside the list, once
  }
  release(slot, kind::list);
  std::sort(regions_.begin(), regions_.end(), std::greater<>());
  for (const auto& [offset, capacity] : regions_) {
    if (capacity == 0) continue;
    if (offset + capacity != tree_.items_.size()) break;
    tree_.items_.resize(offset);
  }
}

int pickle_machine::work_out_role(std::uint64_t id) {
  if (id >= roles_.size()) roles_.resize(id + 1, -1);
  const std::string_view key = tree_.strings_[id];
  int role = role_other;
  if (key == records_->tag_key) role = role_tag;
  else if (key == records_->dropped_key) role = role_dropped;
  for (int f = 0; f < 4; ++f)
    if (key == records_->fields[f]) role = f;
  roles_[id] = static_cast<std::int8_t>(role);
  return role;
}

}  // namespace vram::detail
