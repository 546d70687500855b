#!/usr/bin/env bash
# GPU checks that need no GPU (ctest runs them everywhere; usage: cli_gpu_compile.sh TILELAB SRC):
#   1. the command: `bench roofline` without a GPU says so in one line and exits 1, and a result
#      with wgmma loops saved again carries their rates as the preset's wgmma_*_tflops; `mfma list`
#      and `mfma layout` print what they promise and refuse bad input with exit 2;
#   2. every kernels/ .hip file compiles with nvcc for sm_90a (wgmma included; ptxas serializes no
#      kernel's wgmma) and for sm_80 and
#      sm_89 (README's other NVIDIA builds); gpu.h's software E4M3 -> f16 matches numerics/codes.h
#      (skipped, saying so, without nvcc);
#   3. every kernels/ .hip file's device code compiles with clang-19 for gfx942 and clang-22 for
#      gfx950 (FACTS.md's toolchain lines; each skipped, saying so, without its compiler); in both
#      arches' assembly every kernel spills nothing to scratch (ScratchSize 0, private segment 0)
#      and holds exactly the matrix instructions the rules below allow (the roofline loops' one
#      per accumulator, the MoE GEMM's per dtype); the top-k kernels are all there for both arches
#      and hold no matrix instruction at all, and so are the quant kernels; kernels/mma.h's scaled
#      f8f6f4 form takes its E8M0 scales as VGPRs and each operand's format (gfx950).
# Cost: about 6 minutes on two cores (nvcc sm_90a with its ptxas report, sm_80 + sm_89, both
# clangs); TILELAB_TEST_HOST_ONLY=1 runs part 1 only.
set -uo pipefail
tilelab=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---- 1. the command ---------------------------------------------------------------------------
# (on a machine with a GPU and a GPU build the run is real: then only the bad-input checks apply)
out=$("$tilelab" bench roofline --hw h200 --iters 1 --warmup 0 --quick 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
  [ $rc -eq 1 ] || fail "bench roofline without a GPU exited $rc, want 1"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "bench roofline without a GPU printed $(wc -l <"$tmp/err") error lines"
  grep -q "^tilelab: error: bench roofline: no GPU" "$tmp/err" || fail "bench roofline: '$(cat "$tmp/err")'"
  [ -z "$out" ] || fail "bench roofline without a GPU printed on stdout"
fi
"$tilelab" bench roofline --iters 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench roofline --iters 0 must exit 2"
"$tilelab" bench roofline --hbm-gib nan >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench roofline --hbm-gib nan must exit 2"
"$tilelab" bench roofline --save >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench roofline --save without a file must exit 2"

# a saved H200 result (bench/results) printed against its preset, merged as an overlay, saved again
res=$(ls "$src"/bench/results/*_h200_roofline.json 2>/dev/null | head -1)
if [ -n "$res" ]; then
  "$tilelab" bench roofline --from "$res" --hw h200 --format csv >"$tmp/from.csv" || fail "bench roofline --from $res"
  row=$(grep '^hbm_read_gbps,' "$tmp/from.csv")
  # measured,unit,datasheet,pct_of_datasheet,preset_measured: the preset's datasheet is 4800, its measured
  # value this very file's 4683.5 (presets/hw/h200.json)
  echo "$row" | awk -F, '{exit !($2 >= 4500 && $4 == 4800.0 && $5 > 90 && $5 < 100 && $6 == 4683.5)}' \
    || fail "--from: hbm_read_gbps row '$row' (want >= 4500 GB/s against 4800 datasheet, 4683.5 preset)"
  for k in hbm_copy_gbps bf16_tflops fp8_tflops; do
    grep -q "^$k,[0-9]" "$tmp/from.csv" || fail "--from: no $k row"
  done
  "$tilelab" bench roofline --from "$res" --hw "h200,$res" --format csv >"$tmp/merged.csv" || fail "--hw h200,$res"
  awk -F, '$1 == "bf16_tflops" && $2 != $6 {bad = 1} END {exit bad}' "$tmp/merged.csv" \
    || fail "--hw h200,RESULT does not take the measured ceilings of the overlay"
  "$tilelab" bench roofline --from "$res" --save "$tmp/again.json" >/dev/null || fail "--from --save"
  "$tilelab" bench roofline --from "$tmp/again.json" --format csv | cut -d, -f1,2 >"$tmp/again.csv"
  cut -d, -f1,2 "$tmp/from.csv" | cmp -s - "$tmp/again.csv" || fail "a result saved again does not read back the same"
  compgen -G "$tmp/*.tmp.*" >/dev/null && fail "--save left a temporary file"
fi
# a result with the wgmma loops (an sm_90a build's) carries their rates as the preset's
# wgmma_*_tflops, so that an overlay of it sets the prefill model's matrix rate too
res=$(ls "$src"/bench/results/*_h100_roofline.json 2>/dev/null | head -1)
if [ -n "$res" ]; then
  "$tilelab" bench roofline --from "$res" --save "$tmp/wg.json" >/dev/null || fail "--from $res --save"
  # the best "value" among its configurations of kernel tl_roofline_wgmma_bf16 (one key a line)
  want=$(awk '/"kernel": "tl_roofline_wgmma_bf16"/ {on = 1} on && /"value":/ {v = $2 + 0; if (v > m) m = v; on = 0}
              END {printf "%.1f", m}' "$res")
  got=$("$tilelab" hw show "h200,$tmp/wg.json" --format csv | awk -F, '$1 == "wgmma_bf16_tflops" {print $2}')
  [ -n "$want" ] && awk -v a="$got" -v b="$want" 'BEGIN {exit !(a + 0 == b + 0 && a + 0 > 0)}' \
    || fail "an overlay of $res: wgmma_bf16_tflops '$got', want its wgmma loop's $want"
  grep -q '"wgmma_fp8_tflops"' "$tmp/wg.json" || fail "--save wrote no wgmma_fp8_tflops"
fi
printf '{"ceilings": [1, 2' >"$tmp/bad.json"
"$tilelab" bench roofline --from "$tmp/bad.json" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--from malformed JSON must exit 2"
"$tilelab" bench roofline --from "$tmp/none.json" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--from a missing file must exit 2"
echo '{"device": "x"}' >"$tmp/noceil.json"
"$tilelab" bench roofline --from "$tmp/noceil.json" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--from without ceilings must exit 2"

"$tilelab" mfma list --arch gfx942 --format csv >"$tmp/l942.csv" || fail "mfma list gfx942"
"$tilelab" mfma list --arch gfx950 --format csv >"$tmp/l950.csv" || fail "mfma list gfx950"
for name in v_mfma_f32_16x16x16_bf16 v_mfma_f32_32x32x8_f16 v_mfma_f32_4x4x4_16b_f16 v_mfma_i32_16x16x32_i8 \
            v_mfma_f32_16x16x8_xf32 v_mfma_f32_16x16x32_bf8_fp8 v_mfma_f64_4x4x4_4b_f64 v_mfma_f32_32x32x1_2b_f32; do
  grep -q "^$name," "$tmp/l942.csv" || fail "mfma list gfx942 lacks $name"
done
for name in v_mfma_f32_16x16x32_bf16 v_mfma_f32_32x32x16_f16 v_mfma_f32_16x16x128_f8f6f4_fp4 \
            v_mfma_f32_32x32x64_f8f6f4_fp6 v_mfma_f32_16x16x16_bf16; do
  grep -q "^$name," "$tmp/l950.csv" || fail "mfma list gfx950 lacks $name"
done
grep -q "xf32" "$tmp/l950.csv" && fail "gfx950 has no xf32 instructions"

# one row per element, the promised header, distinct slots
check_layout() { # arch instr matrix rows
  "$tilelab" mfma layout --arch "$1" --instr "$2" --matrix "$3" --format csv >"$tmp/lay.csv" || { fail "mfma layout $*"; return; }
  [ "$(head -1 "$tmp/lay.csv")" = "block,i,j,lane,vgpr,bit_lo,bit_hi" ] || fail "mfma layout $*: header '$(head -1 "$tmp/lay.csv")'"
  local n; n=$(($(wc -l <"$tmp/lay.csv") - 1))
  [ "$n" -eq "$4" ] || fail "mfma layout $*: $n rows, want $4"
  local dup; dup=$(tail -n +2 "$tmp/lay.csv" | cut -d, -f4-6 | sort | uniq -d | head -1)
  [ -z "$dup" ] || fail "mfma layout $*: slot $dup used twice"
}
check_layout gfx942 v_mfma_f32_16x16x16_bf16 A 256
check_layout gfx942 v_mfma_f32_32x32x8_bf16 C 1024
check_layout gfx942 v_mfma_f32_4x4x4_16b_f16 B 256
check_layout gfx950 v_mfma_f32_16x16x128_f8f6f4 A 2048
check_layout gfx950 v_mfma_scale_f32_32x32x64_f8f6f4_fp4 B 2048
check_layout gfx950 v_mfma_f32_16x16x128_f8f6f4_fp6 A 2048
# spot check: 16x16x16 bf16 A(3, 5) is in lane 3 + 16 = 19, register 0, high half
grep -qx "0,3,5,19,0,16,31" <("$tilelab" mfma layout --arch gfx942 --instr v_mfma_f32_16x16x16_bf16 --matrix A) \
  || fail "16x16x16 bf16 A(3,5) is not lane 19, vgpr 0, bits 16..31"
for bad in "--arch gfx90a --instr v_mfma_f32_16x16x16_bf16 --matrix A" \
           "--arch gfx942 --instr v_mfma_f32_16x16x32_bf16 --matrix A" \
           "--arch gfx942 --instr v_mfma_f32_16x16x16_bf16 --matrix E" \
           "--arch gfx942 --matrix A" "--arch gfx942 --instr v_mfma_f32_16x16x16_bf16 --matrix A --format xml"; do
  # shellcheck disable=SC2086
  "$tilelab" mfma layout $bad >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "mfma layout $bad exited $rc, want 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "mfma layout $bad: want one error line"
  [ -s "$tmp/out" ] && fail "mfma layout $bad printed rows"
done

# parts 2 and 3 compile device code, whatever the host build: scripts/test.sh runs them in its
# release pass only (TILELAB_TEST_HOST_ONLY=1 in the sanitizer pass: about 7 minutes saved)
if [ "${TILELAB_TEST_HOST_ONLY:-0}" = 1 ]; then
  [ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  echo "cli_gpu_compile: the command's checks passed; device compiles not repeated (TILELAB_TEST_HOST_ONLY=1)"
  exit 0
fi

# ---- 2. nvcc, sm_90a -------------------------------------------------------------------------
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "SKIPPED: nvcc not found"
else
  for f in "$src"/kernels/*.hip; do
    if ! "$nvcc" -std=c++17 -x cu -arch=sm_90a -DTL_HAVE_WGMMA=1 -O3 -I"$src" -Xptxas -v -c "$f" -o "$tmp/$(basename "$f").o" \
        >"$tmp/nvcc.err" 2>&1; then
      fail "nvcc sm_90a: $(basename "$f")"; head -20 "$tmp/nvcc.err"
    fi
    # ptxas serializes every wgmma of a kernel where it cannot prove an in-flight accumulator
    # untouched (C7514), and then none of its products overlaps other work
    if grep -q "C7514" "$tmp/nvcc.err"; then
      fail "nvcc sm_90a: $(basename "$f"): wgmma serialized by ptxas"; grep "C7514" "$tmp/nvcc.err" | head -3
    fi
  done
  echo "nvcc sm_90a: compiled $(ls "$src"/kernels/*.hip | wc -l) files, no wgmma serialized"
  # README's other NVIDIA builds (-DCMAKE_CUDA_ARCHITECTURES=80 or 89: mma.sync paths, no wgmma, no
  # bulk or tensor copies, E4M3 conversions in software on sm_80): every file compiles for both
  for f in "$src"/kernels/*.hip; do
    if ! "$nvcc" -std=c++17 -x cu -gencode arch=compute_80,code=sm_80 -gencode arch=compute_89,code=sm_89 -O3 -I"$src" \
        -c "$f" -o "$tmp/$(basename "$f").o" 2>"$tmp/nvcc.err"; then
      fail "nvcc sm_80/sm_89: $(basename "$f")"; head -20 "$tmp/nvcc.err"
    fi
  done
  echo "nvcc sm_80, sm_89: compiled $(ls "$src"/kernels/*.hip | wc -l) files"
  # gpu.h's software E4M3 -> f16 (sm_80's path) against numerics/codes.h on all 256 codes
  cat >"$tmp/e4m3f16.cu" <<'EOF'
#include "kernels/gpu.h"
#include <cuda_fp16.h>
#include <math.h>
int main(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        __half_raw raw;
        raw.x = (unsigned short)tl_e4m3_f16_bits(b);
        const float got = __half2float(__half(raw)), want = tl_code_e4m3_to_f32(b);
        if (isnan(want) ? !isnan(got) : (got != want || signbit(got) != signbit(want))) return 1;
    }
    return 0;
}
EOF
  if "$nvcc" -std=c++17 -x cu -arch=sm_90 -O1 -I"$src" "$tmp/e4m3f16.cu" -o "$tmp/e4m3f16" 2>"$tmp/nvcc.err"; then
    "$tmp/e4m3f16" || fail "gpu.h's tl_e4m3_f16_bits differs from tl_code_e4m3_to_f32 on some E4M3 code"
  else
    fail "nvcc: the host check of tl_e4m3_f16_bits does not compile"; head -20 "$tmp/nvcc.err"
  fi
  # the plain-loop target of kernels/mma.h (what every host pass sees) computes a two-step tile
  # product with the same load/store conventions as the matrix-core targets, and decodes E4M3
  cat >"$tmp/generic.cu" <<'EOF'
#include "kernels/mma.h"
#include <math.h>
static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }
static uint16_t random_bf16(uint32_t *s) /* +-[1, 2) */
{
    uint16_t mant = (uint16_t)((lcg(s) >> 20) & 0x7Fu);
    return (uint16_t)(0x3F80u | mant | ((lcg(s) >> 31) << 15));
}
static uint8_t random_e4m3(uint32_t *s)
{
    uint8_t b;
    do b = (uint8_t)(lcg(s) >> 24); while ((b & 0x7F) == 0x7F);
    return b;
}
int main(void)
{
#if !defined(TL_MMA_TARGET_GENERIC)
    return 3;
#else
    if (tl_code_e4m3_to_f32(0x7E) != 448.0f || tl_code_e4m3_to_f32(0x38) != 1.0f ||
        tl_code_e4m3_to_f32(0xC0) != -2.0f || tl_code_e4m3_to_f32(0x01) != 1.0f / 512 ||
        !isnan(tl_code_e4m3_to_f32(0x7F)) || tl_code_bf16_to_f32(0x3FC0) != 1.5f)
        return 4;
    enum { M = TL_MMA_BF16_M, N = TL_MMA_BF16_N, K = TL_MMA_BF16_K, FK = TL_MMA_FP8_K };
    static uint16_t A[M * 2 * K], Bt[N * 2 * K];
    static uint8_t QA[M * 2 * FK], QB[N * 2 * FK];
    static float C[M * N];
    uint32_t seed = 12345;
    for (int i = 0; i < M * 2 * K; i++) A[i] = random_bf16(&seed);
    for (int i = 0; i < N * 2 * K; i++) Bt[i] = random_bf16(&seed);
    for (int i = 0; i < M * 2 * FK; i++) QA[i] = random_e4m3(&seed);
    for (int i = 0; i < N * 2 * FK; i++) QB[i] = random_e4m3(&seed);
    for (int pass = 0; pass < 2; pass++) {
        tl_frag_c c;
        tl_frag_zero(&c);
        int k = pass ? FK : K;
        for (int step = 0; step < 2; step++) {
            if (pass == 0) {
                tl_frag_a_bf16 a;
                tl_frag_b_bf16 b;
                tl_frag_load_a_bf16(&a, A + step * K, 2 * K);
                tl_frag_load_bt_bf16(&b, Bt + step * K, 2 * K);
                tl_mma_bf16(&c, &a, &b);
            } else {
                tl_frag_a_fp8 a;
                tl_frag_b_fp8 b;
                tl_frag_load_a_fp8(&a, QA + step * FK, 2 * FK);
                tl_frag_load_bt_fp8(&b, QB + step * FK, 2 * FK);
                tl_mma_fp8(&c, &a, &b);
            }
        }
        for (int i = 0; i < M * N; i++) C[i] = NAN;
        tl_frag_store_c(&c, C, N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0, mag = 0;
                for (int kk = 0; kk < 2 * k; kk++) {
                    double x = pass ? tl_code_e4m3_to_f32(QA[i * 2 * k + kk]) : tl_code_bf16_to_f32(A[i * 2 * k + kk]);
                    double y = pass ? tl_code_e4m3_to_f32(QB[j * 2 * k + kk]) : tl_code_bf16_to_f32(Bt[j * 2 * k + kk]);
                    ref += x * y;
                    mag += fabs(x * y);
                }
                if (!(fabs(C[i * N + j] - ref) <= 1e-5 * mag)) return 5 + pass;
            }
    }
    return 0;
#endif
}
EOF
  if "$nvcc" -std=c++17 -x cu -arch=sm_90 -O1 -I"$src" "$tmp/generic.cu" -o "$tmp/generic" 2>"$tmp/nvcc.err"; then
    "$tmp/generic"; rc=$?
    [ $rc -eq 0 ] || fail "the plain-loop path of kernels/mma.h failed its host check (code $rc)"
  else
    fail "nvcc: the host check of kernels/mma.h does not compile"; head -20 "$tmp/nvcc.err"
  fi
fi

# ---- 3. AMD device code: clang-19 for gfx942, clang-22 for gfx950 ----------------------------
# The matrix instructions each kernel may hold, per arch: "KERNEL INSTRUCTION COUNT", KERNEL an
# extended regex over the mangled name, COUNT a number, `acc` (the kernel's first template
# argument: the roofline loops keep that many accumulators, one instruction each per iteration) or
# `+` (at least one). Every rule must be met by every kernel it names; an MFMA that no rule allows
# is unintended. The MoE GEMM's dtype is its first template argument (0 bf16, 1 fp8, 2 a16w4,
# 3 mxfp4, 4 mxfp8): on gfx942 every dtype multiplies bf16 (its FP8 is FNUZ: fp8 decoded to bf16,
# the MX types' weights dequantized); on gfx950 bf16 and a16w4 multiply bf16, fp8 its OCP E4M3FN codes
# on the f8f6f4 MFMA with unit scales, and mxfp4 / mxfp8 their MXFP8 activation codes and weight
# codes on it with both operands' E8M0 scales (check_mx_scaled: VGPR scales, FP4 weights for mxfp4). The indexer (kernels/indexer.hip, template <H, BLOCK_Q>) scores
# one 16-position fragment per loop body: H/16 FP8 MFMAs of K-depth 128 on gfx950 (D = 128 in one),
# 4 x H/16 of K-depth 32 on gfx942 (its E4M3FN codes read as FNUZ, every value halved, 0x80 made 0).
# Decode (kernels/decode_paged.hip, kernels/decode_mla.hip): the paged kernel (template <FP8>)
# runs one page of 16 keys a loop body: 8 bf16 16x16x16 MFMAs for K Q^T and 2 x 8 for V^T P^T (128
# dims; P as bf16 hi + lo), the same CDNA3 instruction on both arches (it is bound by HBM); fp8
# codes are decoded to bf16 first. The dual-scope kernel (template <MT, FP8>: MT m-tiles of 16
# heads) runs one tile of 32 slots a loop body: per wave 2 n-tiles x its share of the 576 q.k dims
# (gfx942 DS = 4 / MT waves share K-depth 16 steps: 36 / DS; gfx950 K-depth 32: 18 / DS, unrolled
# to the ceiling) and 2 (P hi + lo) x its 512 / DS value dims x the tile's k-steps.
# Prefill (kernels/prefill.hip, template <ARCH, DQK, DV, BM, BN, WARPS, FP8>; ARCH 1 gfx942, 2
# gfx950, each arch's instances empty on the other): gfx942 multiplies bf16 in both dtypes (its FP8
# is FNUZ: codes decoded), gfx950 bf16 for bf16 and the f8f6f4 MFMA on the E4M3FN codes for fp8.
rules_gfx942='
tl_roofline_mma_bf16I                v_mfma_f32_16x16x16_bf16            acc
tl_roofline_check_mma_bf16           v_mfma_f32_16x16x16_bf16            2
tl_roofline_mma_fp8I                 v_mfma_f32_16x16x32_fp8_fp8         acc
tl_roofline_check_mma_fp8            v_mfma_f32_16x16x32_fp8_fp8         2
moe_gemmI                            v_mfma_f32_16x16x16_bf16            +
indexer_kernelILi32E                 v_mfma_f32_16x16x32_fp8_fp8         8
indexer_kernelILi64E                 v_mfma_f32_16x16x32_fp8_fp8         16
dec_paged_kernelI                    v_mfma_f32_16x16x16_bf16            24
dec_mla_kernelILi2E                  v_mfma_f32_16x16x16_bf16            100
dec_mla_kernelILi1E                  v_mfma_f32_16x16x16_bf16            50
pf_kernelILi1E                       v_mfma_f32_16x16x16_bf16            +'
rules_gfx950='
tl_roofline_mma_bf16I                v_mfma_f32_16x16x32_bf16            acc
tl_roofline_check_mma_bf16           v_mfma_f32_16x16x32_bf16            2
tl_roofline_mma_fp8I                 v_mfma_scale_f32_16x16x128_f8f6f4   acc
tl_roofline_check_mma_fp8            v_mfma_scale_f32_16x16x128_f8f6f4   2
tl_roofline_mma_f8f6f4I              v_mfma_scale_f32_16x16x128_f8f6f4   acc
moe_gemmILi[02]E                     v_mfma_f32_16x16x32_bf16            +
moe_gemmILi[13-4]E                   v_mfma_scale_f32_16x16x128_f8f6f4   +
indexer_kernelILi32E                 v_mfma_scale_f32_16x16x128_f8f6f4   2
indexer_kernelILi64E                 v_mfma_scale_f32_16x16x128_f8f6f4   4
dec_paged_kernelI                    v_mfma_f32_16x16x16_bf16            24
dec_mla_kernelILi2E                  v_mfma_f32_16x16x32_bf16            50
dec_mla_kernelILi1E                  v_mfma_f32_16x16x32_bf16            26
pf_kernelILi2E.*Lb0E                 v_mfma_f32_16x16x32_bf16            +
pf_kernelILi2E.*Lb1E                 v_mfma_scale_f32_16x16x128_f8f6f4   +'

# "KERNEL INSTRUCTION COUNT" for every MFMA mnemonic of every function in the assembly files given
mfma_counts() {
  awk '/^[ \t]*\.type[ \t].*,@function/ { k = $2; sub(/,@function.*/, "", k); next }
       /^[ \t]*v_mfma/ { n[k " " $1]++ }
       END { for (x in n) print x, n[x] }' "$@"
}
# check_mfma ARCH RULES S...: the rules above against the kernels of the assembly files S...
check_mfma() {
  local arch=$1 rules=$2; shift 2
  mfma_counts "$@" >"$tmp/mfma.$arch"
  grep -h "^[[:space:]]*\.amdhsa_kernel " "$@" | awk '{print $2}' >"$tmp/kernels.$arch"
  local kernel instr n pat want allowed acc
  while read -r kernel instr n; do
    allowed=0
    while read -r pat want _; do
      [ -n "$pat" ] && [ "$instr" = "$want" ] && [[ $kernel =~ $pat ]] && allowed=1
    done <<<"$rules"
    [ $allowed -eq 1 ] || fail "$arch: $kernel holds $n $instr, which no rule allows"
  done <"$tmp/mfma.$arch"
  while read -r pat want count; do
    [ -n "$pat" ] || continue
    local named=0
    while read -r kernel; do
      [[ $kernel =~ $pat ]] || continue
      named=$((named + 1))
      n=$(awk -v k="$kernel" -v i="$want" '$1 == k && $2 == i {print $3}' "$tmp/mfma.$arch")
      n=${n:-0}
      acc=$(sed -n 's/^_Z[0-9]*[a-z_0-9]*ILi\([0-9]*\)E.*/\1/p' <<<"$kernel")
      case $count in
        +) [ "$n" -ge 1 ] || fail "$arch: $kernel holds no $want" ;;
        acc) [ "$n" -eq "${acc:--1}" ] || fail "$arch: $kernel holds $n $want, want $acc (one per accumulator)" ;;
        *) [ "$n" -eq "$count" ] || fail "$arch: $kernel holds $n $want, want $count" ;;
      esac
    done <"$tmp/kernels.$arch"
    [ $named -ge 1 ] || fail "$arch: no kernel matches '$pat'"
  done <<<"$rules"
}
# Kernels with no matrix work: top-k (kernels/topk*.hip: integer radix select; both paths, each
# dtype's: 0 float32, 1 bfloat16, 2 float16) and quantization (kernels/quant.hip: conversions and
# shuffles). Every one of their kernels must be in each arch's assembly, and no MFMA rule names
# them, so check_mfma already refuses any matrix instruction in them; check_matrix_free says so by
# name.
topk_kernels='_Z9topk_rowsILi0E _Z9topk_rowsILi1E _Z9topk_rowsILi2E _Z11topk_streamILi0E _Z11topk_streamILi1E _Z11topk_streamILi2E'
quant_kernels='_Z11quant_groupILi0E _Z11quant_groupILi1E _Z11quant_groupILi2E _Z11quant_groupILi3E _Z11quant_groupILi4E _Z11quant_queryILi0E _Z11quant_queryILi1E _Z12quant_unpack'
# check_matrix_free ARCH WHAT PREFIX KERNELS: after check_mfma ARCH (its $tmp/kernels.ARCH and
# $tmp/mfma.ARCH): every kernel of KERNELS is there, and none named PREFIX* holds a matrix instruction
check_matrix_free() {
  local arch=$1 what=$2 prefix=$3 kernels=$4 k n
  for k in $kernels; do
    grep -q "^$k" "$tmp/kernels.$arch" || fail "$arch: no $what kernel $k* in the assembly"
  done
  n=$(grep -c "^_Z[0-9]*$prefix" "$tmp/mfma.$arch")
  [ "$n" -eq 0 ] || fail "$arch: $what kernels hold matrix instructions: $(grep "^_Z[0-9]*$prefix" "$tmp/mfma.$arch" | head -3)"
  echo "$arch: the $(wc -w <<<"$kernels") $what kernels are there, no matrix instructions"
}
# check_scratch ARCH S...: every kernel keeps everything in registers (ScratchSize 0, private segment 0)
check_scratch() {
  local arch=$1; shift
  local kernels zero private
  kernels=$(cat "$@" | grep -c "^[[:space:]]*\.amdhsa_kernel ")
  zero=$(cat "$@" | grep -c "^; ScratchSize: 0$")
  # (grep -c, not a pipe into grep -q: with pipefail an early exit of grep -q would hide the failure)
  private=$(cat "$@" | grep "\.amdhsa_private_segment_fixed_size" | grep -cv " 0$")
  [ "$kernels" -ge 1 ] || fail "$arch: no kernels in the assembly"
  [ "$zero" -eq "$kernels" ] || fail "$arch: only $zero of $kernels kernels have ScratchSize 0"
  [ "$private" -eq 0 ] || fail "$arch: $private kernels have a private segment"
  echo "$arch: $kernels kernels, no scratch"
}
# amd_device ARCH CLANG [FLAGS...]: compiles every kernels/*.hip device-only to $tmp/ARCH/*.s and
# checks its matrix instructions and scratch
amd_device() {
  local arch=$1 cc=$2; shift 2
  local f files=0
  mkdir -p "$tmp/$arch"
  for f in "$src"/kernels/*.hip; do
    if "$cc" -std=c++17 -x hip --offload-arch="$arch" --rocm-path=/usr -nogpulib --cuda-device-only \
         -O3 -S -I"$src" "$@" "$f" -o "$tmp/$arch/$(basename "$f" .hip).s" 2>"$tmp/clang.err"; then
      files=$((files + 1))
    else
      fail "$(basename "$cc") $arch: $(basename "$f")"; head -20 "$tmp/clang.err"
    fi
  done
  echo "$(basename "$cc") $arch: compiled $files files"
  compgen -G "$tmp/$arch/*.s" >/dev/null || return
  check_scratch "$arch" "$tmp/$arch"/*.s
  local rules=rules_$arch
  check_mfma "$arch" "${!rules}" "$tmp/$arch"/*.s
  check_matrix_free "$arch" top-k topk_ "$topk_kernels"
  check_matrix_free "$arch" quant quant_ "$quant_kernels"
  [ "$arch" = gfx950 ] && check_mx_scaled "$tmp/$arch/moe_gemm.s"
}
# check_mx_scaled S: in gfx950's MoE GEMM the MX instances' scaled steps take their E8M0 scales
# from VGPRs (loaded, not the unit constant) with A in E4M3 and B in E2M1 (mxfp4: blgp:4) or E4M3
# (mxfp8: no format fields), both stages
check_mx_scaled() {
  local s=$1 dt k body
  for dt in 3 4; do
    for k in $(grep -o "^_Z8moe_gemmILi${dt}ELi[12]ELi1EEv8GemmArgs:" "$s" | tr -d :); do
      body=$(awk -v k="$k:" '$1 == k {on = 1; next} on && /^[ \t]*s_endpgm/ {exit} on' "$s" | grep "v_mfma_scale_f32_16x16x128_f8f6f4")
      [ -n "$body" ] || { fail "gfx950: $k has no scaled step"; continue; }
      grep -Eq ', v[0-9]+, v[0-9]+ op_sel_hi:\[0,0,0\]' <<<"$body" || fail "gfx950: $k: scales not in VGPRs: $(head -1 <<<"$body")"
      grep -q "cbsz:" <<<"$body" && fail "gfx950: $k: A is not E4M3"
      if [ $dt -eq 3 ]; then grep -q "blgp:4" <<<"$body" || fail "gfx950: $k: B is not E2M1"
      else grep -q "blgp:" <<<"$body" && fail "gfx950: $k: B is not E4M3"; fi
    done
    [ -n "$k" ] || fail "gfx950: no moe_gemm instance of dtype $dt"
  done
  echo "gfx950: the MX GEMMs multiply on the scaled f8f6f4 MFMA with their E8M0 scales"
}
if [ ! -f /usr/include/hip/hip_runtime.h ]; then
  echo "SKIPPED: HIP headers not found (scripts/setup.sh installs libamdhip64-dev)"
else
  if command -v clang++-19 >/dev/null; then amd_device gfx942 clang++-19
  else echo "SKIPPED: gfx942: clang++-19 not found (scripts/setup.sh installs it)"; fi
  # LLVM 22 no longer predefines the wave size that Debian's HIP 5.2 headers read: 64 on CDNA
  if command -v clang++-22 >/dev/null; then
    amd_device gfx950 clang++-22 -D__AMDGCN_WAVEFRONT_SIZE=64
    # kernels/mma.h's scaled form: E8M0 scales from memory reach the instruction as VGPRs, with
    # each operand's format (cbsz / blgp: 4 = E2M1), and the default is the unit scale
    cat >"$tmp/scaled.hip" <<'EOF'
#include "kernels/mma.h"
__global__ void scaled_f8f6f4(const tl_i32x8 *a, const tl_i32x8 *b, const int *sa, const int *sb, float *out)
{
    const int l = tl_lane();
    tl_frag_c c;
    tl_frag_zero(&c);
    tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E2M1, TL_F8F6F4_E2M1>(&c, a[l], b[l], sa[l], sb[l]);
    tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, TL_F8F6F4_E2M1>(&c, a[l + 64], b[l + 64], sa[l + 64], sb[l + 64]);
    tl_mma_f8f6f4_16x16x128<TL_F8F6F4_E4M3, TL_F8F6F4_E4M3>(&c, a[l + 128], b[l + 128]);
    tl_frag_store_c(&c, out, 16);
}
EOF
    if clang++-22 -std=c++17 -x hip --offload-arch=gfx950 --rocm-path=/usr -nogpulib --cuda-device-only -O3 -S \
         -I"$src" -D__AMDGCN_WAVEFRONT_SIZE=64 "$tmp/scaled.hip" -o "$tmp/scaled.s" 2>"$tmp/clang.err"; then
      ins=$(grep "v_mfma_scale_f32_16x16x128_f8f6f4" "$tmp/scaled.s")
      [ "$(grep -c . <<<"$ins")" -eq 3 ] || fail "scaled f8f6f4: want 3 instructions, got '$ins'"
      grep -Eq ', v[0-9]+, v[0-9]+ op_sel_hi:\[0,0,0\] cbsz:4 blgp:4$' <<<"$ins" \
        || fail "scaled f8f6f4: no FP4 x FP4 step with VGPR scales: '$ins'"
      grep -Eq ', v[0-9]+, v[0-9]+ op_sel_hi:\[0,0,0\] blgp:4$' <<<"$ins" \
        || fail "scaled f8f6f4: no FP8 x FP4 step with VGPR scales: '$ins'"
      grep -q "^; ScratchSize: 0$" "$tmp/scaled.s" || fail "scaled f8f6f4: scratch"
      echo "gfx950: the scaled f8f6f4 form takes its E8M0 scales and formats"
    else
      fail "clang++-22 gfx950: the scaled f8f6f4 snippet"; head -20 "$tmp/clang.err"
    fi
  else echo "SKIPPED: gfx950: clang++-22 not found (scripts/setup.sh installs it)"; fi
fi

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "cli_gpu_compile: all checks passed"
