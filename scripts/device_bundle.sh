#!/usr/bin/env bash
# Builds tilelab with the CUDA GPU layer (nvcc, sm_90) into build-cuda/ and gathers the shared
# libraries it needs into .carry/, so that it runs on the lent H200 machine, which has no Cairo or
# Pango and no package registry:
#
#   scripts/device_bundle.sh
#   run(command=". .carry/env.sh && build-cuda/tilelab bench roofline --hw h200",
#       carry=["build-cuda/tilelab", ".carry"])
#
# .carry/lib/      every library `ldd` lists except glibc's, copied under its soname;
# .carry/opt/*.xz  the big ones the H200 image is said to have itself (OpenBLAS, LAPACK(E),
#                  gfortran, jansson), compressed: .carry/env.sh unpacks one into .carry/lib only
#                  when the machine's own loader does not know its soname;
# .carry/env.sh    sets LD_LIBRARY_PATH; source it from the repository root.
# The carry limit is 64 MiB for the whole working tree; the script fails above 56 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-2}

nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || { echo "device_bundle: nvcc not found at $nvcc" >&2; exit 1; }

echo "device_bundle: configuring build-cuda (TILELAB_GPU=cuda, sm_90)"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DTILELAB_GPU=cuda \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DTILELAB_TESTS=OFF >/dev/null
cmake --build build-cuda -j "$jobs" --target tilelab >/dev/null
bin=build-cuda/tilelab
strip --strip-unneeded "$bin" 2>/dev/null || true

rm -rf .carry
mkdir -p .carry/lib .carry/opt
glibc='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libmvec)\.so'
host_has='^(libopenblas|liblapack|liblapacke|libblas|libgfortran|libquadmath|libjansson)\.so'
while read -r soname path; do
  [ -n "$path" ] || continue
  if [[ $soname =~ $glibc ]]; then continue; fi
  if [[ $soname =~ $host_has ]]; then
    xz -9 -T"$jobs" -c <"$path" >".carry/opt/$soname.xz"
  else
    cp -L "$path" ".carry/lib/$soname"
  fi
done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')

cat >.carry/env.sh <<'EOF'
# Sourced from the repository root on the device machine (see scripts/device_bundle.sh).
for f in .carry/opt/*.xz; do
  [ -e "$f" ] || continue
  so=$(basename "$f" .xz)
  if ! ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$so "; then
    xz -dc "$f" >".carry/lib/$so"
  fi
done
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

size_kib=$(du -sk .carry "$bin" | awk '{s += $1} END {print s}')
echo "device_bundle: $bin and .carry/ take $((size_kib / 1024)) MiB" \
     "($(ls .carry/lib | wc -l) libraries copied, $(ls .carry/opt | wc -l) compressed)"
if [ "$size_kib" -gt $((56 * 1024)) ]; then
  echo "device_bundle: over the 56 MiB budget (the carry limit is 64 MiB with the tree)" >&2
  exit 1
fi
echo "device_bundle: run with carry=[\"build-cuda/tilelab\", \".carry\"] and '. .carry/env.sh && build-cuda/tilelab ...'"
