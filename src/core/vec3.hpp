// A 3-vector usable on host and device. Vec3d holds positions and momenta on the host;
// Vec3f is what GPU kernels see.
#pragma once
#include <cmath>

#include "core/hostdevice.hpp"

namespace orbis {

template <typename T>
struct Vec3 {
  T x{}, y{}, z{};

  ORBIS_HD T& operator[](int d) { return d == 0 ? x : (d == 1 ? y : z); }
  ORBIS_HD const T& operator[](int d) const { return d == 0 ? x : (d == 1 ? y : z); }

  ORBIS_HD Vec3& operator+=(const Vec3& o) { x += o.x; y += o.y; z += o.z; return *this; }
  ORBIS_HD Vec3& operator-=(const Vec3& o) { x -= o.x; y -= o.y; z -= o.z; return *this; }
  ORBIS_HD Vec3& operator*=(T s) { x *= s; y *= s; z *= s; return *this; }
};

template <typename T> ORBIS_HD Vec3<T> operator+(Vec3<T> a, const Vec3<T>& b) { return a += b; }
template <typename T> ORBIS_HD Vec3<T> operator-(Vec3<T> a, const Vec3<T>& b) { return a -= b; }
template <typename T> ORBIS_HD Vec3<T> operator*(Vec3<T> a, T s) { return a *= s; }
template <typename T> ORBIS_HD Vec3<T> operator*(T s, Vec3<T> a) { return a *= s; }
template <typename T> ORBIS_HD T dot(const Vec3<T>& a, const Vec3<T>& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
template <typename T> ORBIS_HD T norm2(const Vec3<T>& a) { return dot(a, a); }
template <typename T> inline T norm(const Vec3<T>& a) { return std::sqrt(norm2(a)); }

using Vec3d = Vec3<double>;
using Vec3f = Vec3<float>;

// Nearest periodic image of a separation d in a box of side L (any d, not only |d| < L).
inline double periodic_wrap_delta(double d, double box) { return d - box * std::nearbyint(d / box); }
// A coordinate mapped into [0, L) (host and device: the PM assigns on both).
ORBIS_HD double periodic_wrap_position(double x, double box) {
  double y = x - box * std::floor(x / box);
  return y >= box ? y - box : y;   // floor can round x/box up to exactly 1 for tiny negatives
}

}  // namespace orbis
