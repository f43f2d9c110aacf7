// The keys the global top tree's radix selection reads (domain/global_top_tree.hpp), one
// definition for the host's passes over a rank's members (domain/top_tree_host_passes.cpp)
// and the device's (gpu/global_top_tree_cuda.cu): both read the same digits, so they count
// the same histograms and send every member to the same child.
//
// A coordinate maps to an order-preserving uint64 (ordered_bits); a member's key under axis
// A is the 192-bit word of its coordinates A, A+1, A+2 (mod 3), most significant first, and
// PositionLess<A> (tree/orb_tree.hpp) is the order of keys.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hostdevice.hpp"

namespace orbis::top_tree {

inline constexpr int kKeyBits = 192;       // (A, A+1, A+2), 64 bits each
inline constexpr int kDigitBits = 8;       // a round's digit, at least
inline constexpr int kMaxDigitBits = 16;   // and at most

ORBIS_HD std::uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

ORBIS_HD double bits_double(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// An order-preserving map of doubles (not NaN) to uint64: flip all bits of negatives, the
// sign bit of the rest. -0.0 maps as +0.0, since PositionLess (operator<, ==) does not tell
// them apart. No double maps to ~0 (that would be a NaN): it marks "no member" in the
// device's box minima.
ORBIS_HD std::uint64_t ordered_bits(double x) {
  if (x == 0.0) x = 0.0;
  const std::uint64_t u = double_bits(x);
  return (u >> 63) != 0 ? ~u : (u | (std::uint64_t{1} << 63));
}

// The inverse of ordered_bits (-0.0 comes back as +0.0).
ORBIS_HD double from_ordered(std::uint64_t u) {
  return bits_double((u >> 63) != 0 ? (u & ~(std::uint64_t{1} << 63)) : ~u);
}

// What a pass reads of a splitting node in a round, in one record: its first bin in the
// round's histograms (its 2^width bins follow; -1: not counted this round), the bin its rank
// fell in (after the reduction), whether that settled it, and where its digit lies in a
// member's key (words hw and lw of the key, the digit the top `width` bits of (key[hw] <<
// off) | (key[lw] & lw_mask) >> (64 - off)). The same layout on host and device (the device
// gets the host's array as bytes).
struct RoundNode {
  std::int32_t first_bin = -1, cut = 0;
  std::uint8_t hw = 0, lw = 0, off = 0, done = 0, width = kDigitBits;
  std::uint64_t lw_mask = 0;
};

// The `width` bits at the node's bit position of a member's key, from the key's words r.hw
// (high) and r.lw (low) (bits past the key's end read 0), branch-free ((x >> 1) >> (63 -
// off) is x >> (64 - off), also for off = 0).
ORBIS_HD int round_digit(std::uint64_t high, std::uint64_t low, const RoundNode& r) {
  const std::uint64_t window = (high << r.off) | (((low & r.lw_mask) >> 1) >> (63 - r.off));
  return static_cast<int>(window >> (64 - r.width));
}

// Compares a member's key under `axis` (its coordinates' ordered bits k[0..2], by axis
// x, y, z) with the 192-bit threshold t (rotated to the axis: t[0] the word of `axis`): -1, 0
// or 1. U: a 64-bit unsigned type (the device's atomics take unsigned long long).
template <typename U>
ORBIS_HD int compare_key(const U* k, int axis, const U* t) {
  static_assert(sizeof(U) == 8, "64-bit key words");
  for (int w = 0; w < 3; ++w) {
    const U v = k[(axis + w) % 3];
    if (v != t[w]) return v < t[w] ? -1 : 1;
  }
  return 0;
}

}  // namespace orbis::top_tree
