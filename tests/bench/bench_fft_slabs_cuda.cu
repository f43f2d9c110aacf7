// Benchmark of what the PM over ranks' mesh work costs against the one-GPU PM's (issue #29):
// the one-GPU 3D transforms of a step's mesh (one R2C, three C2R), the same work as one rank's
// slab pieces of P ranks (batched 2D R2C / C2R over its x planes, the 1D C2C x lines of its y
// slab, strided as CudaPmSlabs keeps them and contiguous for comparison), the pack of one
// x -> y block (a pitched copy, as the transposes' fill), and, with two devices, that block
// copied device to device (one direction, then both at once). Float meshes, in place, as the
// long-range PM. Each row is the median of --reps runs after one warm-up.
//
//   bench_fft_slabs_cuda [--reps=R] [--ranks=P] [N ...]   (default: 5 reps, P = 2, 512 768)
#include <cufft.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"

using namespace orbis;

namespace {

// Median milliseconds of `reps` timed runs of `work` (queued on the legacy stream) after one
// untimed one.
double median_ms(int reps, const std::function<void()>& work) {
  cudaEvent_t a, b;
  ORBIS_CUDA_CHECK(cudaEventCreate(&a));
  ORBIS_CUDA_CHECK(cudaEventCreate(&b));
  work();
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    ORBIS_CUDA_CHECK(cudaEventRecord(a));
    work();
    ORBIS_CUDA_CHECK(cudaEventRecord(b));
    ORBIS_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run(long long n, int ranks, int reps, int devices) {
  const long long nzc = n / 2 + 1, nx = n / ranks, ny = n / ranks;
  ORBIS_CUDA_CHECK(cudaSetDevice(0));
  // One GPU: the whole mesh, in place.
  void* mesh = nullptr;
  ORBIS_CUDA_CHECK(cudaMalloc(&mesh, static_cast<std::size_t>(n * n * 2 * nzc) * sizeof(float)));
  ORBIS_CUDA_CHECK(cudaMemset(mesh, 0, static_cast<std::size_t>(n * n * 2 * nzc) * sizeof(float)));
  cufftHandle r2c = 0, c2r = 0;
  ORBIS_CUFFT_CHECK(cufftPlan3d(&r2c, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n), CUFFT_R2C));
  ORBIS_CUFFT_CHECK(cufftPlan3d(&c2r, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n), CUFFT_C2R));
  auto* real = static_cast<cufftReal*>(mesh);
  auto* modes = static_cast<cufftComplex*>(mesh);
  const double whole = median_ms(reps, [&] {
    ORBIS_CUFFT_CHECK(cufftExecR2C(r2c, real, modes));
    for (int d = 0; d < 3; ++d) ORBIS_CUFFT_CHECK(cufftExecC2R(c2r, modes, real));
  });
  cufftDestroy(r2c);
  cufftDestroy(c2r);
  ORBIS_CUDA_CHECK(cudaFree(mesh));

  // One rank of `ranks`: its x slab (planes, padded rows) and y slab ([i][j - y0][k]).
  const std::size_t x_bytes = static_cast<std::size_t>(nx * n * 2 * nzc) * sizeof(float);
  const std::size_t y_bytes = static_cast<std::size_t>(n * ny * nzc) * sizeof(cufftComplex);
  const std::size_t block_bytes = static_cast<std::size_t>(nx * ny * nzc) * sizeof(cufftComplex);
  void *x_slab = nullptr, *y_slab = nullptr, *packed = nullptr;
  ORBIS_CUDA_CHECK(cudaMalloc(&x_slab, x_bytes));
  ORBIS_CUDA_CHECK(cudaMalloc(&y_slab, y_bytes));
  ORBIS_CUDA_CHECK(cudaMalloc(&packed, block_bytes));
  ORBIS_CUDA_CHECK(cudaMemset(x_slab, 0, x_bytes));
  ORBIS_CUDA_CHECK(cudaMemset(y_slab, 0, y_bytes));
  long long dims[2] = {n, n}, real_embed[2] = {n, 2 * nzc}, complex_embed[2] = {n, nzc};
  long long line[1] = {n};
  const long long columns = ny * nzc;
  cufftHandle planes_r2c = 0, planes_c2r = 0, strided = 0, contiguous = 0;
  std::size_t work = 0;
  for (cufftHandle* p : {&planes_r2c, &planes_c2r, &strided, &contiguous}) ORBIS_CUFFT_CHECK(cufftCreate(p));
  ORBIS_CUFFT_CHECK(cufftMakePlanMany64(planes_r2c, 2, dims, real_embed, 1, n * 2 * nzc, complex_embed, 1, n * nzc,
                                        CUFFT_R2C, nx, &work));
  ORBIS_CUFFT_CHECK(cufftMakePlanMany64(planes_c2r, 2, dims, complex_embed, 1, n * nzc, real_embed, 1, n * 2 * nzc,
                                        CUFFT_C2R, nx, &work));
  ORBIS_CUFFT_CHECK(
      cufftMakePlanMany64(strided, 1, line, line, columns, 1, line, columns, 1, CUFFT_C2C, columns, &work));
  ORBIS_CUFFT_CHECK(cufftMakePlanMany64(contiguous, 1, line, line, 1, n, line, 1, n, CUFFT_C2C, columns, &work));
  auto* xr = static_cast<cufftReal*>(x_slab);
  auto* xc = static_cast<cufftComplex*>(x_slab);
  auto* yc = static_cast<cufftComplex*>(y_slab);
  const double planes_fwd = median_ms(reps, [&] { ORBIS_CUFFT_CHECK(cufftExecR2C(planes_r2c, xr, xc)); });
  const double planes_inv = median_ms(reps, [&] { ORBIS_CUFFT_CHECK(cufftExecC2R(planes_c2r, xc, xr)); });
  const double lines_strided =
      median_ms(reps, [&] { ORBIS_CUFFT_CHECK(cufftExecC2C(strided, yc, yc, CUFFT_FORWARD)); });
  const double lines_contiguous =
      median_ms(reps, [&] { ORBIS_CUFFT_CHECK(cufftExecC2C(contiguous, yc, yc, CUFFT_FORWARD)); });
  // The block for the next rank: nx rows of ny (n/2+1) values, a row every n (n/2+1).
  const std::size_t row = static_cast<std::size_t>(ny * nzc) * sizeof(cufftComplex);
  const double pack = median_ms(reps, [&] {
    ORBIS_CUDA_CHECK(cudaMemcpy2DAsync(packed, row, static_cast<char*>(x_slab) + row,
                                       static_cast<std::size_t>(n * nzc) * sizeof(cufftComplex), row,
                                       static_cast<std::size_t>(nx), cudaMemcpyDeviceToDevice));
  });
  const double slab_mesh = planes_fwd + planes_inv * 3 + lines_strided * 4;
  std::printf("| %lld^3 | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** (%.2fx) | %.2f (%.0f MB) |", n, ranks,
              whole, planes_fwd, planes_inv, lines_strided, lines_contiguous, slab_mesh, slab_mesh, whole / slab_mesh,
              pack, block_bytes / 1e6);
  if (devices > 1) {
    // The block pulled by device 1 from device 0, then both directions at once.
    void* far = nullptr;
    ORBIS_CUDA_CHECK(cudaSetDevice(1));
    ORBIS_CUDA_CHECK(cudaMalloc(&far, 2 * block_bytes));
    cudaDeviceEnablePeerAccess(0, 0);
    cudaStream_t back = nullptr;
    ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&back, cudaStreamNonBlocking));
    ORBIS_CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceEnablePeerAccess(1, 0);
    cudaGetLastError();   // "already enabled" is no error here
    const double one_way =
        median_ms(reps, [&] { ORBIS_CUDA_CHECK(cudaMemcpyPeerAsync(far, 1, packed, 0, block_bytes)); });
    const double both = median_ms(reps, [&] {
      ORBIS_CUDA_CHECK(cudaMemcpyPeerAsync(far, 1, packed, 0, block_bytes));
      ORBIS_CUDA_CHECK(cudaMemcpyPeerAsync(packed, 0, static_cast<char*>(far) + block_bytes, 1, block_bytes, back));
      ORBIS_CUDA_CHECK(cudaStreamSynchronize(back));
    });
    std::printf(" %.2f (%.0f GB/s) | %.2f |", one_way, block_bytes / 1e6 / one_way, both);
    ORBIS_CUDA_CHECK(cudaStreamDestroy(back));
    ORBIS_CUDA_CHECK(cudaFree(far));
  } else {
    std::printf(" – | – |");
  }
  std::printf("\n");
  for (cufftHandle p : {planes_r2c, planes_c2r, strided, contiguous}) cufftDestroy(p);
  for (void* p : {x_slab, y_slab, packed}) ORBIS_CUDA_CHECK(cudaFree(p));
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, ranks = 2;
  std::vector<long long> sides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) reps = std::max(1, std::atoi(a.c_str() + 7));
    else if (a.rfind("--ranks=", 0) == 0) ranks = std::max(1, std::atoi(a.c_str() + 8));
    else if (std::atoll(a.c_str()) >= 8) sides.push_back(std::atoll(a.c_str()));
    else {
      std::fprintf(stderr, "usage: bench_fft_slabs_cuda [--reps=R] [--ranks=P] [N ...] (got '%s')\n", argv[i]);
      return 2;
    }
  }
  if (sides.empty()) sides = {512, 768};
  int devices = 0;
  ORBIS_CUDA_CHECK(cudaGetDeviceCount(&devices));
  cudaDeviceProp prop{};
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s x %d, %d reps (median ms); one rank of P: its slab pieces of a mesh's one R2C and three C2R\n",
              prop.name, devices, reps);
  std::printf("| mesh | P | one GPU, 3D | planes R2C | planes C2R | x lines (strided) | x lines (contiguous) | "
              "slab pieces, one rank | pack of a block | block to the other GPU | both ways at once |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (long long n : sides) {
    if (n % ranks != 0) {
      std::fprintf(stderr, "bench_fft_slabs_cuda: %lld is not a multiple of %d ranks\n", n, ranks);
      return 2;
    }
    run(n, ranks, reps, devices);
  }
  return 0;
}
