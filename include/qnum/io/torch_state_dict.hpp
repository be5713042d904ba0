// PyTorch state dicts saved by torch.save (`pytorch_model.bin`), read without executing
// anything. A pickle is a program for a stack machine whose GLOBAL and REDUCE opcodes import
// and call arbitrary Python; this reader interprets only the opcodes a state dict uses and
// knows only the globals it names — collections.OrderedDict, torch._utils._rebuild_tensor_v2
// and _rebuild_parameter, and the torch.*Storage types — as data constructors. Any other
// opcode or global (os.system, builtins.eval, ...) is an error naming it, raised when it is
// read, before anything after it.
//
// Both layouts torch.save writes are read:
//   - zip (torch >= 1.6): <root>/data.pkl, whose persistent ids
//     ('storage', type, key, location, numel) name the raw little-endian member <root>/data/<key>;
//   - legacy: pickles of the magic number, protocol version and system info, the state dict
//     (persistent ids ('storage', type, key, location, numel, view)), the list of storage
//     keys, then for each key its element count (int64) and bytes.
// Tensors come back as float32 (qnum's Tensor): float16/bfloat16 widen exactly; float64 and
// integer tensors (e.g. position_ids) are converted when every value is exact in float32,
// else an error names the tensor.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/io/archive.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum {

namespace detail {

/// How deep containers may nest in a pickle. A state dict nests a few levels (a checkpoint's
/// dict of dicts of tensors); the bound keeps the recursive destruction of a hostile pickle's
/// values on the stack (TUPLE1 nests one level per byte: a 56 KB pickle found by
/// fuzz_torch_state_dict overflowed it).
inline constexpr int kMaxPickleDepth = 100;

/// A value on the restricted unpickler's stack.
struct PickleValue {
  enum class Kind { none, boolean, integer, real, string, tuple, list, dict, global, storage, tensor, mark };
  Kind kind = Kind::none;
  std::int64_t i = 0;
  double f = 0;
  std::string s;                                    // string; global "module.name"; storage dtype
  std::vector<std::shared_ptr<PickleValue>> items;  // tuple, list; dict: key, value, key, value, ...
  // storage: s = dtype, key; tensor: storage (items[0]), offset, sizes, strides
  std::string key;
  std::int64_t offset = 0;
  std::vector<std::int64_t> sizes, strides;
  int depth = 0;        // levels of containers below: 0 for a scalar or an empty container
  bool sealed = false;  // placed in a container: its contents may no longer change
};
using PickleRef = std::shared_ptr<PickleValue>;

inline PickleRef pickle_value(PickleValue::Kind k) {
  auto v = std::make_shared<PickleValue>();
  v->kind = k;
  return v;
}

/// Bytes per element of a torch storage type ("FloatStorage", ...); 0 if not one.
inline std::size_t torch_storage_element_size(std::string_view type) {
  if (type == "FloatStorage" || type == "IntStorage") return 4;
  if (type == "HalfStorage" || type == "BFloat16Storage" || type == "ShortStorage") return 2;
  if (type == "DoubleStorage" || type == "LongStorage") return 8;
  if (type == "ByteStorage" || type == "CharStorage" || type == "BoolStorage") return 1;
  return 0;
}

/// Interprets a pickle's state-dict subset. `where` names the source in errors.
class StateDictUnpickler {
 public:
  StateDictUnpickler(std::string_view bytes, std::string where) : b_(bytes), where_(std::move(where)) {}

  /// Runs to STOP and returns the result; pos() is then just after it.
  PickleRef load() {
    while (true) {
      require(p_ < b_.size(), where_, ": pickle ends without STOP at byte ", p_);
      const std::size_t at = p_;
      const auto op = static_cast<unsigned char>(b_[p_++]);
      switch (op) {
        case 0x80:
          take(1);
          break;  // PROTO
        case 0x95:
          take(8);
          break;  // FRAME
        case '(':
          push(pickle_value(PickleValue::Kind::mark));
          break;
        case '}':
          push(pickle_value(PickleValue::Kind::dict));
          break;
        case ']':
          push(pickle_value(PickleValue::Kind::list));
          break;
        case ')':
          push(pickle_value(PickleValue::Kind::tuple));
          break;
        case 'N':
          push(pickle_value(PickleValue::Kind::none));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          auto v = pickle_value(PickleValue::Kind::boolean);
          v->i = op == 0x88;
          push(v);
          break;
        }
        case 'K':
          push_int(static_cast<unsigned char>(take(1)[0]));
          break;  // BININT1
        case 'M':
          push_int(le<std::uint16_t>(take(2)));
          break;  // BININT2
        case 'J':
          push_int(static_cast<std::int32_t>(le<std::uint32_t>(take(4))));
          break;      // BININT
        case 0x8a: {  // LONG1 (raw bytes kept in s: torch's magic is 10 bytes)
          const auto n = static_cast<unsigned char>(take(1)[0]);
          const std::string_view d = take(n);
          std::uint64_t u = 0;
          for (std::size_t k = 0; k < n && k < 8; ++k) u |= std::uint64_t{static_cast<unsigned char>(d[k])} << (8 * k);
          if (n > 0 && n < 8 && (static_cast<unsigned char>(d[n - 1]) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);
          push_int(static_cast<std::int64_t>(u));
          stack_.back()->s = std::string(d);
          break;
        }
        case 'G': {  // BINFLOAT (big-endian)
          const std::string_view d = take(8);
          std::uint64_t u = 0;
          for (char c : d) u = (u << 8) | static_cast<unsigned char>(c);
          auto v = pickle_value(PickleValue::Kind::real);
          v->f = std::bit_cast<double>(u);
          push(v);
          break;
        }
        case 'X':
          push_string(take(le<std::uint32_t>(take(4))));
          break;  // BINUNICODE
        case 0x8c:
          push_string(take(static_cast<unsigned char>(take(1)[0])));
          break;  // SHORT_BINUNICODE
        case 'T':
          push_string(take(le<std::uint32_t>(take(4))));
          break;  // BINSTRING
        case 'U':
          push_string(take(static_cast<unsigned char>(take(1)[0])));
          break;     // SHORT_BINSTRING
        case 'c': {  // GLOBAL
          std::string module = line();
          global(module, line(), at);
          break;
        }
        case 'q':
          memo_[static_cast<unsigned char>(take(1)[0])] = top(at);
          break;  // BINPUT
        case 'r':
          memo_[le<std::uint32_t>(take(4))] = top(at);
          break;  // LONG_BINPUT
        case 0x94:
          memo_[memo_.size()] = top(at);
          break;  // MEMOIZE
        case 'h':
          push(memo(static_cast<unsigned char>(take(1)[0]), at));
          break;  // BINGET
        case 'j':
          push(memo(le<std::uint32_t>(take(4)), at));
          break;  // LONG_BINGET
        case 't':
          push(tuple(pop_to_mark(at), at));
          break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          std::vector<PickleRef> xs(op - 0x84u);
          for (auto it = xs.rbegin(); it != xs.rend(); ++it) *it = pop(at);
          push(tuple(std::move(xs), at));
          break;
        }
        case 'a': {  // APPEND
          auto x = pop(at);
          insert(expect(top(at), PickleValue::Kind::list, "APPEND", at), {x}, at);
          break;
        }
        case 'e': {  // APPENDS
          auto xs = pop_to_mark(at);
          insert(expect(top(at), PickleValue::Kind::list, "APPENDS", at), xs, at);
          break;
        }
        case 's': {  // SETITEM
          auto v = pop(at), k = pop(at);
          insert(expect(top(at), PickleValue::Kind::dict, "SETITEM", at), {k, v}, at);
          break;
        }
        case 'u': {  // SETITEMS
          auto kv = pop_to_mark(at);
          require(kv.size() % 2 == 0, where_, ": SETITEMS with an odd number of items at byte ", at);
          insert(expect(top(at), PickleValue::Kind::dict, "SETITEMS", at), kv, at);
          break;
        }
        case 'b': {  // BUILD: only an OrderedDict's attributes (_metadata)
          pop(at);
          expect(top(at), PickleValue::Kind::dict, "BUILD", at);
          break;
        }
        case 'Q':
          push(persistent(pop(at), at));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          auto args = pop(at), fn = pop(at);
          push(reduce(fn, args, at));
          break;
        }
        case '.':
          return pop(at);  // STOP
        default:
          fail(where_, ": pickle opcode 0x", hex(op), " at byte ", at,
               " is not allowed in a state dict (refused: the file may run code)");
      }
    }
  }

  std::size_t pos() const { return p_; }
  /// Storages by key, as referenced by the persistent ids (dtype in `s`, numel in `i`).
  const std::map<std::string, PickleRef>& storages() const { return storages_; }

 private:
  static std::string hex(unsigned op) {
    static constexpr char d[] = "0123456789abcdef";
    return {d[op >> 4], d[op & 15]};
  }
  template <class T>
  static T le(std::string_view d) {
    T v{};
    std::memcpy(&v, d.data(), sizeof(T));
    return v;
  }
  std::string_view take(std::size_t n) {
    require(n <= b_.size() - p_, where_, ": pickle truncated at byte ", p_);
    const auto d = b_.substr(p_, n);
    p_ += n;
    return d;
  }
  std::string line() {
    const auto end = b_.find('\n', p_);
    require(end != std::string_view::npos, where_, ": pickle truncated in a GLOBAL at byte ", p_);
    std::string s(b_.substr(p_, end - p_));
    p_ = end + 1;
    return s;
  }
  void push(PickleRef v) { stack_.push_back(std::move(v)); }
  void push_int(std::int64_t x) {
    auto v = pickle_value(PickleValue::Kind::integer);
    v->i = x;
    push(v);
  }
  void push_string(std::string_view s) {
    auto v = pickle_value(PickleValue::Kind::string);
    v->s = std::string(s);
    push(v);
  }
  PickleRef top(std::size_t at) const {
    require(!stack_.empty() && stack_.back()->kind != PickleValue::Kind::mark, where_,
            ": pickle stack underflow at byte ", at);
    return stack_.back();
  }
  PickleRef pop(std::size_t at) {
    auto v = top(at);
    stack_.pop_back();
    return v;
  }
  std::vector<PickleRef> pop_to_mark(std::size_t at) {
    std::vector<PickleRef> xs;
    while (true) {
      require(!stack_.empty(), where_, ": pickle MARK missing at byte ", at);
      auto v = stack_.back();
      stack_.pop_back();
      if (v->kind == PickleValue::Kind::mark) break;
      xs.push_back(v);
    }
    return {xs.rbegin(), xs.rend()};
  }
  PickleRef memo(std::uint64_t k, std::size_t at) const {
    const auto it = memo_.find(k);
    require(it != memo_.end(), where_, ": pickle memo ", k, " used before it was set, at byte ", at);
    return it->second;
  }
  /// Appends xs to container c's items. A value placed in a container is sealed, and filling a
  /// sealed container is refused: torch.save fills each container before placing it, and a
  /// memo GET that hands back a container already placed is how a pickle puts a container
  /// inside itself (a shared_ptr cycle, leaked). So nothing above c changes when c does, and
  /// depths stay exact; the check costs O(|xs|), not a walk of what xs holds.
  void insert(const PickleRef& c, const std::vector<PickleRef>& xs, std::size_t at) const {
    const int depth = nest(xs, at);
    require(!c->sealed, where_, ": pickle puts a container inside itself, or fills one already placed in another, ",
            "at byte ", at);
    c->depth = std::max(c->depth, depth);
    c->items.insert(c->items.end(), xs.begin(), xs.end());
  }
  /// Seals xs and returns the depth of a container holding them, within kMaxPickleDepth.
  int nest(const std::vector<PickleRef>& xs, std::size_t at) const {
    int depth = 0;
    for (const auto& x : xs) {
      x->sealed = true;
      depth = std::max(depth, x->depth + 1);
    }
    require(depth <= kMaxPickleDepth, where_, ": pickle nests containers more than ", kMaxPickleDepth,
            " deep at byte ", at, " (a state dict nests a few)");
    return depth;
  }
  PickleRef expect(PickleRef v, PickleValue::Kind k, const char* op, std::size_t at) const {
    require(v->kind == k, where_, ": pickle ", op, " on an unexpected object at byte ", at);
    return v;
  }
  PickleRef tuple(std::vector<PickleRef> xs, std::size_t at) const {
    auto v = pickle_value(PickleValue::Kind::tuple);
    v->depth = nest(xs, at);
    v->items = std::move(xs);
    return v;
  }

  void global(const std::string& module, const std::string& name, std::size_t at) {
    const std::string full = module + "." + name;
    const bool ok = full == "collections.OrderedDict" || full == "torch._utils._rebuild_tensor_v2" ||
                    full == "torch._utils._rebuild_parameter" ||
                    (module == "torch" && torch_storage_element_size(name) != 0);
    require(ok, where_, ": pickle global '", full, "' at byte ", at,
            " is not allowed in a state dict (only collections.OrderedDict, torch tensor rebuilds and storage "
            "types; refused: the file may run code)");
    auto v = pickle_value(PickleValue::Kind::global);
    v->s = full;
    push(v);
  }

  std::int64_t int_of(const PickleRef& v, const char* what, std::size_t at) const {
    require(v->kind == PickleValue::Kind::integer, where_, ": ", what, " is not an integer at byte ", at);
    return v->i;
  }
  std::vector<std::int64_t> ints_of(const PickleRef& v, const char* what, std::size_t at) const {
    require(v->kind == PickleValue::Kind::tuple, where_, ": ", what, " is not a tuple at byte ", at);
    std::vector<std::int64_t> xs;
    for (const auto& x : v->items) xs.push_back(int_of(x, what, at));
    return xs;
  }

  PickleRef persistent(const PickleRef& pid, std::size_t at) {
    const auto& t = pid->items;
    require(pid->kind == PickleValue::Kind::tuple && t.size() >= 5 && t[0]->kind == PickleValue::Kind::string &&
                t[0]->s == "storage" && t[1]->kind == PickleValue::Kind::global &&
                t[2]->kind == PickleValue::Kind::string,
            where_, ": persistent id at byte ", at, " is not a torch storage reference");
    auto s = pickle_value(PickleValue::Kind::storage);
    s->s = t[1]->s.substr(t[1]->s.find('.') + 1);
    s->key = t[2]->s;
    s->i = int_of(t[4], "storage size", at);
    require(s->i >= 0, where_, ": negative storage size at byte ", at);
    if (const auto it = storages_.find(s->key); it != storages_.end()) return it->second;
    storages_[s->key] = s;
    return s;
  }

  PickleRef reduce(const PickleRef& fn, const PickleRef& args, std::size_t at) {
    require(fn->kind == PickleValue::Kind::global && args->kind == PickleValue::Kind::tuple, where_,
            ": REDUCE of something that is not an allowed global at byte ", at);
    const auto& a = args->items;
    if (fn->s == "collections.OrderedDict") {
      require(a.empty(), where_, ": OrderedDict with arguments at byte ", at);
      return pickle_value(PickleValue::Kind::dict);
    }
    if (fn->s == "torch._utils._rebuild_parameter") {
      require(!a.empty() && a[0]->kind == PickleValue::Kind::tensor, where_,
              ": _rebuild_parameter without a tensor at byte ", at);
      return a[0];
    }
    require(fn->s == "torch._utils._rebuild_tensor_v2", where_, ": global '", fn->s, "' called at byte ", at,
            " (only OrderedDict and tensor rebuilds may be called)");
    require(a.size() >= 4 && a[0]->kind == PickleValue::Kind::storage, where_,
            ": _rebuild_tensor_v2 without a storage at byte ", at);
    auto t = pickle_value(PickleValue::Kind::tensor);
    t->items = {a[0]};
    t->offset = int_of(a[1], "storage offset", at);
    t->sizes = ints_of(a[2], "tensor size", at);
    t->strides = ints_of(a[3], "tensor stride", at);
    require(t->sizes.size() == t->strides.size() && t->offset >= 0, where_, ": tensor with ", t->sizes.size(),
            " sizes and ", t->strides.size(), " strides at byte ", at);
    return t;
  }

  std::string_view b_;
  std::string where_;
  std::size_t p_ = 0;
  std::vector<PickleRef> stack_;
  std::map<std::uint64_t, PickleRef> memo_;
  std::map<std::string, PickleRef> storages_;
};

/// Element `k` of a storage's bytes as double (exact for every torch dtype read here).
inline double storage_element(std::string_view type, const char* p) {
  auto get = [&]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<double>(v);
  };
  if (type == "FloatStorage") return get(float{});
  if (type == "DoubleStorage") return get(double{});
  if (type == "HalfStorage" || type == "BFloat16Storage") {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return type == "HalfStorage" ? half_bits_to_float(h) : bf16_bits_to_float(h);
  }
  if (type == "LongStorage") return get(std::int64_t{});
  if (type == "IntStorage") return get(std::int32_t{});
  if (type == "ShortStorage") return get(std::int16_t{});
  if (type == "CharStorage") return get(std::int8_t{});
  return get(std::uint8_t{});  // ByteStorage, BoolStorage
}

/// The state dict's tensors as float32, gathered through their strides from `storage_bytes`.
inline std::map<std::string, Tensor> materialize_state_dict(const PickleRef& root,
                                                            const std::map<std::string, std::string>& storage_bytes,
                                                            const std::string& where) {
  require(root->kind == PickleValue::Kind::dict, where, ": the pickle is not a dict (not a state dict)");
  std::map<std::string, Tensor> out;
  for (std::size_t k = 0; k + 1 < root->items.size(); k += 2) {
    const auto& name = root->items[k];
    const auto& t = root->items[k + 1];
    require(name->kind == PickleValue::Kind::string, where, ": a state dict key is not a string");
    require(t->kind == PickleValue::Kind::tensor, where, ": '", name->s, "' is not a tensor");
    const auto& st = *t->items[0];
    const auto it = storage_bytes.find(st.key);
    require(it != storage_bytes.end(), where, ": storage '", st.key, "' of '", name->s, "' is missing");
    const std::size_t esize = torch_storage_element_size(st.s);
    // Sizes from the pickle are checked against the bytes present, as counts (no product
    // can wrap), before anything is allocated.
    require(esize > 0 && st.i >= 0 && static_cast<std::uint64_t>(st.i) <= it->second.size() / esize, where,
            ": storage '", st.key, "' holds ", it->second.size(), " bytes, fewer than its ", st.i, " elements");
    require(t->sizes.size() <= kMaxTensorRank, where, ": '", name->s, "' has rank ", t->sizes.size());
    Shape shape(t->sizes.begin(), t->sizes.end());
    std::int64_t n = 1, last = t->offset;
    for (std::size_t d = 0; d < t->sizes.size(); ++d) {
      require(t->sizes[d] >= 0 && t->strides[d] >= 0, where, ": '", name->s, "' has a negative size or stride");
      require(!__builtin_mul_overflow(n, t->sizes[d], &n) && n <= std::max<std::int64_t>(st.i, 1), where, ": '",
              name->s, "' has more elements than its storage holds (", st.i, "; expanded views are not read)");
    }
    for (std::size_t d = 0; n > 0 && d < t->sizes.size(); ++d) {
      std::int64_t step = 0;
      require(
          !__builtin_mul_overflow(t->sizes[d] - 1, t->strides[d], &step) && !__builtin_add_overflow(last, step, &last),
          where, ": '", name->s, "' reaches past its storage (", st.i, " elements)");
    }
    require(n == 0 || last < st.i, where, ": '", name->s, "' reaches past its storage (", st.i, " elements)");
    std::vector<float> v(static_cast<std::size_t>(n));
    std::vector<std::int64_t> idx(t->sizes.size(), 0);
    for (std::int64_t e = 0; e < n; ++e) {
      std::int64_t off = t->offset;
      for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t->strides[d];
      const double x = storage_element(st.s, it->second.data() + static_cast<std::size_t>(off) * esize);
      v[static_cast<std::size_t>(e)] = static_cast<float>(x);
      require(std::isnan(x) || static_cast<double>(v[static_cast<std::size_t>(e)]) == x, where, ": '", name->s, "' (",
              st.s, ") holds ", x, ", which float32 cannot represent exactly");
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t->sizes[d]) break;
        idx[d] = 0;
      }
    }
    out.emplace(name->s, Tensor(shape, std::move(v)));
  }
  return out;
}

/// The legacy (pre-zip) layout: magic, protocol, sys info, state dict, keys, storages.
inline std::map<std::string, Tensor> parse_legacy_torch_save(std::string_view bytes, const std::string& where) {
  std::size_t pos = 0;
  auto next = [&]() {
    StateDictUnpickler u(bytes.substr(pos), where);
    auto v = u.load();
    pos += u.pos();
    return v;
  };
  static constexpr char kMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";  // 0x1950a86a20f9469cfc6c
  const auto magic = next();
  require(magic->kind == PickleValue::Kind::integer && magic->s == std::string_view(kMagic, 10), where,
          ": not a torch.save file (neither a zip nor the legacy magic number)");
  const auto protocol = next();
  require(protocol->kind == PickleValue::Kind::integer && protocol->i == 1001, where,
          ": unsupported legacy torch.save protocol");
  next();  // system info: byte order and type sizes (little-endian assumed, as written by x86/ARM)
  StateDictUnpickler main(bytes.substr(pos), where);
  auto root = main.load();
  pos += main.pos();
  const auto keys = next();
  require(keys->kind == PickleValue::Kind::list, where, ": legacy storage key list missing");
  std::map<std::string, std::string> data;
  for (const auto& k : keys->items) {
    require(k->kind == PickleValue::Kind::string, where, ": legacy storage key is not a string");
    const auto it = main.storages().find(k->s);
    require(it != main.storages().end(), where, ": storage '", k->s, "' listed but not used");
    require(bytes.size() - pos >= 8, where, ": truncated before storage '", k->s, "'");
    std::int64_t count = 0;
    std::memcpy(&count, bytes.data() + pos, 8);
    pos += 8;
    // Compared as a count (count * size could wrap past the check).
    const std::size_t size = torch_storage_element_size(it->second->s);
    require(count >= 0 && size > 0 && static_cast<std::uint64_t>(count) <= (bytes.size() - pos) / size, where,
            ": storage '", k->s, "' of ", count, " elements is truncated or larger than the file");
    const std::size_t n = static_cast<std::size_t>(count) * size;
    data[k->s] = std::string(bytes.substr(pos, n));
    pos += n;
  }
  return materialize_state_dict(root, data, where);
}

/// Which torch.save layout a file starting with `head` (its first 4 bytes or fewer) has: true
/// for zip, false for the legacy pickle; a qnum::Error for neither.
inline bool torch_zip_layout(std::string_view head, const std::string& where) {
  if (head.substr(0, 4) == std::string_view("PK\x03\x04", 4)) return true;
  require(!head.empty() && head[0] == '\x80', where, ": not a torch.save file (neither a zip nor a pickle)");
  return false;
}

/// The members of a torch.save zip that hold the state dict: <root>/data.pkl and <root>/data/*.
inline bool torch_zip_member(std::string_view n) {
  const auto slash = n.find('/');
  return slash != std::string_view::npos && (n.substr(slash) == "/data.pkl" || n.substr(slash).starts_with("/data/"));
}

/// The state dict of a torch.save zip's members (torch_zip_member, read by name).
inline std::map<std::string, Tensor> torch_zip_state_dict(std::map<std::string, std::string> files,
                                                          const std::string& where) {
  std::string pkl_name;
  for (const auto& [name, bytes] : files)
    if (name.ends_with("/data.pkl") && name.find('/') == name.size() - 9) pkl_name = name;
  require(!pkl_name.empty(), where, ": zip without <root>/data.pkl (not a torch.save file)");
  const std::string root = pkl_name.substr(0, pkl_name.size() - 8);  // "<root>/"
  StateDictUnpickler u(files[pkl_name], where);
  auto dict = u.load();
  std::map<std::string, std::string> data;
  for (const auto& [key, storage] : u.storages()) {
    auto it = files.find(root + "data/" + key);
    require(it != files.end(), where, ": storage '", key, "' (", root, "data/", key, ") is missing");
    data[key] = std::move(it->second);
  }
  return materialize_state_dict(dict, data, where);
}

}  // namespace detail

/// Reads a state dict written by torch.save (zip or legacy layout) as float32 tensors by
/// name, executing nothing; qnum::Error naming the file and the problem otherwise. The zip is
/// streamed through libarchive (only the state dict's members are held in memory).
inline std::map<std::string, Tensor> read_torch_state_dict(const std::filesystem::path& path) {
  const std::string where = "torch checkpoint '" + path.string() + "'";
  const std::string head = [&] {
    std::ifstream in(path, std::ios::binary);
    detail::require(static_cast<bool>(in), where, ": cannot open it");
    std::string h(4, '\0');
    in.read(h.data(), 4);
    h.resize(static_cast<std::size_t>(in.gcount()));
    return h;
  }();
  if (!detail::torch_zip_layout(head, where)) return detail::parse_legacy_torch_save(read_file(path), where);
  return detail::torch_zip_state_dict(read_archive_files(path, detail::torch_zip_member), where);
}

/// read_torch_state_dict over a torch.save file's bytes in memory; `where` names them in errors.
inline std::map<std::string, Tensor> parse_torch_state_dict(std::string_view bytes, const std::string& where) {
  if (!detail::torch_zip_layout(bytes.substr(0, 4), where)) return detail::parse_legacy_torch_save(bytes, where);
  return detail::torch_zip_state_dict(read_archive_bytes(bytes, where, detail::torch_zip_member), where);
}

/// Tensors of a weights file by name: safetensors (`.safetensors`) or torch.save
/// (`.bin`, `.pt`, `.pth`), as float32. The one reader the HF loaders use.
inline SafetensorsFile read_weights_file(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  if (ext == ".bin" || ext == ".pt" || ext == ".pth") return {read_torch_state_dict(path), {}, {}};
  return read_safetensors(path);
}

}  // namespace qnum
