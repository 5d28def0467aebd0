// E-matching on a mirror of an e-graph (taso/ematch.h).
#include "taso/ematch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace taso {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

const std::vector<int32_t> kNone;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("ematch: " + what);
}

}  // namespace

size_t EMatcher::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) {
    h ^= static_cast<uint32_t>(x);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

void EMatcher::set_graph(int32_t num_class_ids, int32_t out_type,
                         const std::vector<int32_t>& type, const std::vector<int32_t>& cls,
                         const std::vector<uint8_t>& usable,
                         const std::vector<int32_t>& out_index,
                         const std::vector<int32_t>& child_start,
                         const std::vector<int32_t>& children,
                         const std::vector<int32_t>& class_order,
                         const std::vector<int32_t>& class_start,
                         const std::vector<int32_t>& class_nodes) {
  const size_t n = type.size();
  require(num_class_ids >= 0, "negative class count");
  require(cls.size() == n && usable.size() == n && out_index.size() == n &&
              child_start.size() == n + 1,
          "per-e-node arrays of different lengths");
  require(class_start.size() == class_order.size() + 1, "class_start has the wrong length");
  require(child_start.empty() || (child_start[0] == 0 &&
                                  static_cast<size_t>(child_start[n]) == children.size()),
          "child_start does not span children");
  require(class_start[0] == 0 &&
              static_cast<size_t>(class_start[class_order.size()]) == class_nodes.size(),
          "class_start does not span class_nodes");
  for (size_t i = 0; i < n; ++i) {
    require(child_start[i] <= child_start[i + 1], "child_start decreases");
    require(cls[i] >= 0 && cls[i] < num_class_ids, "an e-node's class is out of range");
  }
  for (int32_t c : children) require(c >= 0 && c < num_class_ids, "a child class is out of range");
  for (size_t k = 0; k < class_order.size(); ++k)
    require(class_start[k] <= class_start[k + 1], "class_start decreases");
  for (int32_t c : class_order) require(c >= 0 && c < num_class_ids, "a class is out of range");
  for (int32_t m : class_nodes)
    require(m >= 0 && static_cast<size_t>(m) < n, "a class's e-node is out of range");

  num_class_ids_ = num_class_ids;
  out_type_ = out_type;
  type_ = type;
  cls_ = cls;
  usable_ = usable;
  out_index_ = out_index;
  child_start_ = child_start;
  children_ = children;
  members_.assign(num_class_ids, {});
  by_type_.clear();
  parents_.clear();
  outs_.clear();
  readers_.assign(num_class_ids, {});
  scans_.clear();
  scans_within_.clear();
  within_.clear();
  for (size_t i = 0; i < n; ++i) {
    by_type_[type[i]].push_back(static_cast<int32_t>(i));
    // Projections as the e-graph's memo finds them (every e-node kept for
    // congruence, usable or not).
    if (type[i] == out_type && out_index[i] >= 0 && child_start[i + 1] - child_start[i] == 1)
      outs_.emplace(pair_key(children[child_start[i]], out_index[i]), cls[i]);
  }
  std::vector<int32_t> distinct;
  for (size_t k = 0; k < class_order.size(); ++k) {
    const int32_t c = class_order[k];
    std::vector<int32_t>& into = members_[c];
    for (int32_t i = class_start[k]; i < class_start[k + 1]; ++i) {
      const int32_t m = class_nodes[i];
      into.push_back(m);
      distinct.assign(children.begin() + child_start[m], children.begin() + child_start[m + 1]);
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      for (int32_t d : distinct) {
        parents_[pair_key(d, type[m])].push_back(m);
        readers_[d].push_back(cls[m]);
      }
    }
  }
}

void EMatcher::set_fit(int32_t signature, size_t first, const std::vector<uint8_t>& bits) {
  require(signature >= 0, "negative signature");
  if (static_cast<size_t>(signature) >= fit_.size()) fit_.resize(signature + 1);
  std::vector<uint8_t>& f = fit_[signature];
  if (f.size() < first + bits.size()) f.resize(first + bits.size(), 0);
  std::copy(bits.begin(), bits.end(), f.begin() + first);
  scans_.erase(signature);
}

int32_t EMatcher::add_pattern(const EPattern& pattern) {
  const int32_t nops = static_cast<int32_t>(pattern.ops.size());
  require(nops > 0, "a pattern without ops");
  require(pattern.num_vars >= 0, "negative variable count");
  for (const EPatternOp& op : pattern.ops) {
    require(op.signature >= 0, "negative signature");
    for (const auto& in : op.inputs) {
      if (in.first >= 0)
        require(in.first < nops && in.second >= 0, "an input op is out of range");
      else
        require(-1 - in.first < pattern.num_vars, "an input variable is out of range");
    }
  }
  require(static_cast<int32_t>(pattern.steps.size()) == nops, "steps do not place every op");
  std::vector<uint8_t> placed(nops, 0);
  for (const EStep& s : pattern.steps) {
    require(s.op >= 0 && s.op < nops && !placed[s.op], "a step places an op twice or none");
    placed[s.op] = 1;
    if (s.kind == EStepKind::kDown) {
      require(s.via_op >= 0 && s.via_op < nops && placed[s.via_op] && s.slot >= 0 &&
                  s.slot < static_cast<int32_t>(pattern.ops[s.via_op].inputs.size()),
              "a down step reads an unplaced op or a missing slot");
    } else if (s.kind == EStepKind::kUp) {
      if (s.via_op < 0)
        require(s.var >= 0 && s.var < pattern.num_vars, "an up step's variable is out of range");
      else
        require(s.via_op < nops && placed[s.via_op], "an up step reads an unplaced op");
    } else {
      require(s.kind == EStepKind::kScan, "an unknown step kind");
    }
  }
  require(static_cast<int32_t>(pattern.var_order.size()) == pattern.num_vars,
          "var_order does not list every variable");
  for (int32_t v : pattern.var_order) require(v >= 0 && v < pattern.num_vars, "var_order");
  for (const EPatternOp& op : pattern.ops) {
    auto known = signature_type_.find(op.signature);
    require(known == signature_type_.end() || known->second == op.type,
            "a signature of two op types");
    signature_type_[op.signature] = op.type;
  }
  patterns_.push_back(pattern);
  applied_.emplace_back();
  return static_cast<int32_t>(patterns_.size()) - 1;
}

void EMatcher::set_within(int32_t id, const std::vector<int32_t>& classes, int32_t steps) {
  std::vector<uint8_t> in(num_class_ids_, 0);
  std::vector<int32_t> level, next;
  for (int32_t c : classes) {
    require(c >= 0 && c < num_class_ids_, "a within class is out of range");
    if (!in[c]) {
      in[c] = 1;
      level.push_back(c);
    }
  }
  for (int32_t s = 0; s < steps && !level.empty(); ++s) {
    next.clear();
    for (int32_t c : level)
      for (int32_t p : readers_[c])
        if (!in[p]) {
          in[p] = 1;
          next.push_back(p);
        }
    level.swap(next);
  }
  within_[id] = std::move(in);
  for (auto it = scans_within_.begin(); it != scans_within_.end();) {
    if (static_cast<int32_t>(it->first >> 32) == id)
      it = scans_within_.erase(it);
    else
      ++it;
  }
}

void EMatcher::add_applied(int32_t pattern, const std::vector<int32_t>& nodes) {
  require(pattern >= 0 && pattern < num_patterns(), "pattern id out of range");
  applied_[pattern].insert(nodes);
}

bool EMatcher::fits(int32_t signature, int32_t node) const {
  if (static_cast<size_t>(signature) >= fit_.size()) return false;
  const std::vector<uint8_t>& f = fit_[signature];
  return static_cast<size_t>(node) < f.size() && f[node];
}

int32_t EMatcher::out_class(int32_t tuple_class, int32_t index) const {
  auto it = outs_.find(pair_key(tuple_class, index));
  return it == outs_.end() ? -1 : it->second;
}

const std::vector<int32_t>& EMatcher::scan(int32_t signature) {
  auto it = scans_.find(signature);
  if (it != scans_.end()) return it->second;
  std::vector<int32_t>& out = scans_[signature];
  auto known = signature_type_.find(signature);
  if (known == signature_type_.end()) return out;
  auto of_type = by_type_.find(known->second);
  if (of_type != by_type_.end())
    for (int32_t n : of_type->second)
      if (usable_[n] && fits(signature, n)) out.push_back(n);
  return out;
}

const std::vector<int32_t>& EMatcher::parents_of(int32_t cls, int32_t type) const {
  auto it = parents_.find(pair_key(cls, type));
  return it == parents_.end() ? kNone : it->second;
}

const std::vector<int32_t>& EMatcher::class_members(int32_t cls) const {
  if (cls < 0 || cls >= num_class_ids_) return kNone;
  return members_[cls];
}

// One depth-first search of one pattern (the Python matcher's `search`).
struct EMatcher::Search {
  EMatcher& m;
  const EPattern& p;
  const std::unordered_set<std::vector<int32_t>, VecHash>& applied;
  size_t limit;
  const std::vector<int32_t>* roots;  // the first step's candidates where restricted
  std::vector<int32_t> nodes;         // per op: its e-node, -1 unplaced
  std::vector<int32_t> vars;          // per variable: its class, -1 unbound
  EMatches out;

  int32_t op_out(int32_t j, int32_t index) const {
    const int32_t c = m.cls_[nodes[j]];
    return p.ops[j].projected ? m.out_class(c, index) : c;
  }

  void candidates(const EStep& s, std::vector<int32_t>* into) {
    into->clear();
    const EPatternOp& op = p.ops[s.op];
    if (s.kind == EStepKind::kScan) {
      const std::vector<int32_t>& all =
          roots && &s == &p.steps[0] ? *roots : m.scan(op.signature);
      into->assign(all.begin(), all.end());
      return;
    }
    if (s.kind == EStepKind::kDown) {
      const int32_t via = nodes[s.via_op];
      const int32_t child = m.children_[m.child_start_[via] + s.slot];
      if (op.projected) {
        for (int32_t o : m.class_members(child)) {
          if (m.type_[o] != m.out_type_ || m.out_index_[o] != s.index) continue;
          if (m.child_start_[o + 1] - m.child_start_[o] < 1) continue;
          for (int32_t n : m.class_members(m.children_[m.child_start_[o]]))
            if (m.type_[n] == op.type) into->push_back(n);
        }
        return;
      }
      for (int32_t n : m.class_members(child))
        if (m.type_[n] == op.type && m.fits(op.signature, n)) into->push_back(n);
      return;
    }
    const int32_t source = s.via_op < 0 ? vars[s.var] : op_out(s.via_op, s.index);
    if (source < 0) return;
    for (int32_t n : m.parents_of(source, op.type))
      if (m.usable_[n] && m.fits(op.signature, n)) into->push_back(n);
  }

  // Places e-node n as op j; fills `newly` with the variables it binds.
  bool place(int32_t j, int32_t n, std::vector<int32_t>* newly) {
    newly->clear();
    if (std::find(nodes.begin(), nodes.end(), n) != nodes.end()) return false;
    const EPatternOp& op = p.ops[j];
    if (!m.usable_[n] || (op.projected && !m.fits(op.signature, n))) return false;
    const int32_t first = m.child_start_[n];
    const int32_t arity = m.child_start_[n + 1] - first;
    if (arity != static_cast<int32_t>(op.inputs.size())) return false;
    nodes[j] = n;
    bool ok = true;
    for (size_t k = 0; k < op.inputs.size() && ok; ++k) {
      const int32_t c = m.children_[first + static_cast<int32_t>(k)];
      const int32_t in = op.inputs[k].first;
      if (in < 0) {
        const int32_t v = -1 - in;
        if (vars[v] < 0) {
          vars[v] = c;
          newly->push_back(v);
        } else if (vars[v] != c) {
          ok = false;
        }
      } else if (nodes[in] >= 0 && op_out(in, op.inputs[k].second) != c) {
        ok = false;
      }
    }
    // Placed consumers of op j must read this e-node's output.
    for (size_t q = 0; q < p.ops.size() && ok; ++q) {
      if (nodes[q] < 0) continue;
      const EPatternOp& reader = p.ops[q];
      for (size_t k = 0; k < reader.inputs.size() && ok; ++k) {
        if (reader.inputs[k].first != j) continue;
        const int32_t read = m.children_[m.child_start_[nodes[q]] + static_cast<int32_t>(k)];
        if (read != op_out(j, reader.inputs[k].second)) ok = false;
      }
    }
    if (ok) return true;
    nodes[j] = -1;
    for (int32_t v : *newly) vars[v] = -1;
    newly->clear();
    return false;
  }

  bool complete() {
    for (int32_t c : vars)
      for (int32_t n : nodes)
        if (m.cls_[n] == c) return false;  // a variable is a matched op's output: a cycle
    if (!applied.empty() && applied.count(nodes)) return false;
    out.nodes.insert(out.nodes.end(), nodes.begin(), nodes.end());
    for (int32_t v : p.var_order) out.vars.push_back(vars[v]);
    ++out.count;
    return out.count >= limit;
  }

  bool search(size_t depth, std::vector<std::vector<int32_t>>* cands,
              std::vector<std::vector<int32_t>>* newly) {
    if (depth == p.steps.size()) return complete();
    const EStep& s = p.steps[depth];
    std::vector<int32_t>& here = (*cands)[depth];
    candidates(s, &here);
    for (size_t i = 0; i < here.size(); ++i) {
      if (!place(s.op, here[i], &(*newly)[depth])) continue;
      const bool done = search(depth + 1, cands, newly);
      nodes[s.op] = -1;
      for (int32_t v : (*newly)[depth]) vars[v] = -1;
      if (done) return true;
    }
    return false;
  }
};

EMatches EMatcher::match(int32_t pattern, size_t limit, int32_t within) {
  require(pattern >= 0 && pattern < num_patterns(), "pattern id out of range");
  const EPattern& p = patterns_[pattern];
  const std::vector<int32_t>* roots = nullptr;
  if (within >= 0) {
    auto w = within_.find(within);
    require(w != within_.end(), "no such within set");
    const int32_t sig = p.ops[p.steps[0].op].signature;
    const uint64_t key = pair_key(within, sig);
    auto it = scans_within_.find(key);
    if (it == scans_within_.end()) {
      std::vector<int32_t> kept;
      for (int32_t n : scan(sig))
        if (w->second[cls_[n]]) kept.push_back(n);
      it = scans_within_.emplace(key, std::move(kept)).first;
    }
    roots = &it->second;
  }
  Search s{*this, p, applied_[pattern], limit, roots,
           std::vector<int32_t>(p.ops.size(), -1), std::vector<int32_t>(p.num_vars, -1), {}};
  if (limit == 0) return s.out;
  std::vector<std::vector<int32_t>> cands(p.steps.size()), newly(p.steps.size());
  s.search(0, &cands, &newly);
  return s.out;
}

}  // namespace taso
